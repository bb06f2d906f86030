"""URL rules compile their URL builders on first use (start-up time), and build the same URLs."""

from __future__ import annotations

from flask import url_for
from werkzeug.routing import Rule

from numi.web.routing import LazyBuilderRule


def _compiled(rule: Rule) -> bool:
    # Until its first use, a rule's builder is the stand-in closure made by
    # LazyBuilderRule._compile_builder; afterwards it is the function werkzeug compiled.
    return "build_on_first_use" not in rule._build_unknown.__qualname__


def test_builders_wait_for_the_first_url_for_and_then_are_kept(sqlite_app):
    rules = [rule for rule in sqlite_app.url_map.iter_rules() if rule.endpoint != "static"]
    assert len(rules) > 50 and all(isinstance(rule, LazyBuilderRule) for rule in rules)
    assert not any(_compiled(rule) for rule in rules), "no builder is compiled at start-up"

    with sqlite_app.test_request_context():
        chat_rule = next(
            rule for rule in rules if rule.arguments == {"chat_id"} and "GET" in rule.methods
        )
        url = url_for(chat_rule.endpoint, chat_id="a b/c", extra="1")
        assert url.startswith("/") and "a%20b" in url and url.endswith("?extra=1")
        assert _compiled(chat_rule)
        builder = chat_rule._build_unknown
        assert url_for(chat_rule.endpoint, chat_id="x") != url
        assert chat_rule._build_unknown is builder, "compiled once, then kept"

        # Every rule builds the URL werkzeug's own eagerly compiled rule builds.
        for rule in rules:
            # Any value but a settings section's, which names one of a fixed list.
            values = {name: "endpoints" if name == "section" else "7" for name in rule.arguments}
            eager = Rule(
                rule.rule, endpoint=rule.endpoint, methods=rule.methods, defaults=rule.defaults
            )
            eager.bind(sqlite_app.url_map)
            assert rule.build(values) == eager.build(values), rule.rule


def test_sidebar_item_urls_are_the_urls_url_for_builds(sqlite_app):
    """The sidebar builds its items' five links once per request and fills in each chat id
    (numi/web/pages/chat_list.py, chat_item_urls): the same URLs as url_for, for every id and
    `current`, including ids that need quoting and a `current` holding the fill-in mark."""
    from numi.web.pages.chat_list import _CHAT_ID_MARK, chat_item_urls

    ids = [
        "0f8e0a52-1b6c-4bd4-9d1a-3f0e5c2f7a11",
        "plain_id-2",
        "a b/c",
        "ünï",
        "x?y&z=1",
        _CHAT_ID_MARK,
    ]
    currents = [None, "", "0f8e0a52-1b6c-4bd4-9d1a-3f0e5c2f7a11", _CHAT_ID_MARK, "a&b=c d"]
    endpoints = {
        "view": ("pages.chat_view", False),
        "organise": ("organising.organise", True),
        "rename": ("pages.rename_form", True),
        "delete": ("pages.delete", True),
        "menu": ("pages.chat_menu", True),
    }
    with sqlite_app.test_request_context():
        for current in currents:
            for chat_id in ids:
                urls = chat_item_urls(chat_id, current)
                expected = {
                    name: url_for(
                        endpoint, chat_id=chat_id, **({"current": current} if with_current else {})
                    )
                    for name, (endpoint, with_current) in endpoints.items()
                }
                assert urls == expected, (chat_id, current)
