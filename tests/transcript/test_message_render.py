"""The markdown of saved messages on the page (issue 28, item 5): rendered once per text and
kept (a second view of a chat renders nothing), never stale (a changed text shows at once)."""

from __future__ import annotations

import uuid


def _set_content(app, message_id: int, text: str) -> None:
    from numi.extensions import db
    from numi.models import Message

    with app.app_context():
        db.session.get(Message, message_id).content = text
        db.session.commit()


def test_a_second_view_renders_nothing_and_a_changed_text_is_rendered_anew(
    multi_app, users, client_a, rows
):
    from numi.web.live.message_render import HTML

    # The cache is per process, across the apps of a test run: texts of this test only.
    tag = uuid.uuid4().hex
    chat_id, (_, answer_id) = rows(
        users["a"].id, [("user", "Hi"), ("assistant", f"First **answer** {tag}")]
    )
    first = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f"First <strong>answer</strong> {tag}" in first
    misses, hits = HTML.misses, HTML.hits
    second = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f"First <strong>answer</strong> {tag}" in second
    assert HTML.misses == misses, "the second view rendered the message again"
    assert HTML.hits > hits

    # A changed text (same id, same length) has another key: it is rendered and shown anew.
    _set_content(multi_app, answer_id, f"Other **answer** {tag}")
    third = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f"Other <strong>answer</strong> {tag}" in third and "First" not in third
    assert HTML.misses == misses + 1


def _rows(app, user_id, messages):
    from numi.extensions import db
    from numi.models import Chat, Message

    with app.app_context():
        chat = Chat(user_id=user_id, title="Long")
        db.session.add(chat)
        db.session.flush()
        ids = []
        for role, content in messages:
            message = Message(chat_id=chat.id, role=role, content=content)
            db.session.add(message)
            db.session.flush()
            ids.append(message.id)
        db.session.commit()
        return chat.id, ids


def test_the_cache_is_bounded():
    from markupsafe import Markup

    from numi.web.live.message_render import HtmlCache

    cache = HtmlCache(max_entries=3, max_chars=100)
    for n in range(5):
        cache.put(("m", n), Markup(f"text {n}"), 10)
    assert len(cache) == 3 and cache.get(("m", 0)) is None and cache.get(("m", 4)) is not None
    cache.put(("big",), Markup("x"), 95)
    assert len(cache) == 1, "entries past the character bound are dropped, oldest first"


def test_an_answer_past_the_cap_is_shown_plain_and_as_markdown_on_its_owners_request(
    multi_app, users, client_a, client_b
):
    app = multi_app
    app.config["NUMI_MARKDOWN_MAX_CHARS"] = 100
    long = "**bold** <b>raw</b> words\n\n" * 10
    chat_id, (question_id, answer_id) = _rows(
        app, users["a"].id, [("user", long), ("assistant", long)]
    )
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "<strong>bold</strong>" not in page and "&lt;b&gt;raw&lt;/b&gt;" in page
    assert page.count("Show as markdown") == 1, (
        "only the answer offers it (a question is never markdown)"
    )
    url = f"/c/{chat_id}/messages/{answer_id}/markdown"
    response = client_a.get(url, headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<strong>bold</strong>" in html and "<b>" not in html
    assert f'id="msg-{answer_id}-plain-note" hx-swap-oob="true"' in html
    assert client_b.get(url).status_code == 404, "another user's answer"
    refused = client_a.get(
        f"/c/{chat_id}/messages/{question_id}/markdown", headers={"HX-Request": "true"}
    )
    assert refused.status_code == 400 and "not_markdown" in refused.get_data(as_text=True)


def test_only_a_long_question_is_collapsed_and_its_whole_text_is_on_the_page(users, client_a, rows):
    long_text = "\n".join(f"row {n} <b>" for n in range(13))  # past 12 lines
    chat_id, _ = rows(
        users["a"].id,
        [
            ("user", long_text),
            ("assistant", "Ok."),
            ("user", "x" * 1000),  # at the limit, not past it
            ("assistant", "Ok."),
            ("user", "y" * 1001),
        ],
    )
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert page.count('class="show-more"') == 2
    assert page.count('class="user-text long"') == 2
    # The whole text is there (escaped), only clamped by CSS: nothing needs a script to read it.
    assert "row 12 &lt;b&gt;" in page and "row 0 <b>" not in page
