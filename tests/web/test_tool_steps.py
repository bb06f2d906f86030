"""A step's tool calls folded (issue 43, tool steps): a run of consecutive finished calls of
one tool reads as one line in words; a call that runs, failed, was refused or waits for
approval always stands alone. The template escapes every piece and shows hidden characters."""

from __future__ import annotations

import pytest
from flask import render_template

from numi.web.live.tool_steps import groups, summary


def done(name: str, **arguments) -> dict:
    return {"call_id": f"c{id(arguments)}", "name": name, "status": "done", "arguments": arguments}


def words(pieces) -> str:
    return "".join(f"“{text}”" if kind == "quote" else text for kind, text in pieces)


def shape(cards) -> list[int]:
    """Each group's size, 0 for a card that stands alone."""
    return [len(g["cards"]) if g["summary"] else 0 for g in groups(cards)]


def test_three_page_reads_fold_under_one_line_naming_their_sites():
    cards = [done("fetch_page", url=f"https://{host}/x") for host in ("a.com", "b.org", "a.com")]
    (group,) = groups(cards)
    assert group["cards"] == cards
    assert words(group["summary"]) == "Read 3 pages: a.com, b.org"


def test_searches_name_their_queries_and_cut_after_three():
    queries = ["otters", "sea otters", "otter\nhands", "rafts"]
    line = words(summary([done("web_search", query=q) for q in queries]))
    assert line == "Searched the web for “otters”, “sea otters”, “otter …”, …"
    again = words(summary([done("web_search", query="x"), done("web_search", query="x")]))
    assert again == "Searched the web for “x” (2 times)"


@pytest.mark.parametrize(
    "name,arguments,expected",
    [
        ("bash", {"command": "ls"}, "Ran 3 commands"),
        ("read_file", {"path": "a.txt"}, "Read 3 files: a.txt"),
        ("run_python", {"code": "1"}, "Ran Python 3 times"),
        ("mcp__notes__find", {}, "Used find on notes 3 times"),
        ("custom", {}, "Used custom 3 times"),
        ("fetch_page", {}, "Read 3 pages"),
        ("web_search", {}, "Searched the web 3 times"),
    ],
)
def test_each_tool_counts_its_run_in_words(name, arguments, expected):
    assert words(summary([done(name, **arguments) for _ in range(3)])) == expected


def test_a_call_that_did_not_end_well_is_never_folded_away():
    for status in ("running", "failed", "denied", "approval", "pending", "stopped"):
        odd = {**done("fetch_page", url="https://c.net"), "status": status}
        cards = [
            done("fetch_page", url="https://a.com"),
            odd,
            done("fetch_page", url="https://b.org"),
        ]
        assert shape(cards) == [0, 0, 0], status
        cards = [
            done("fetch_page", url="https://a.com"),
            done("fetch_page", url="https://b.org"),
            odd,
        ]
        assert shape(cards) == [2, 0], status
        assert groups(cards)[1]["cards"] == [odd]


def test_only_consecutive_calls_of_one_tool_fold():
    cards = [
        done("web_search", query="a"),
        done("fetch_page", url="https://a.com"),
        done("fetch_page", url="https://b.com"),
        done("web_search", query="b"),
        done("web_search", query="c"),
        done("bash", command="ls"),
    ]
    assert shape(cards) == [0, 2, 2, 0]
    assert [c for g in groups(cards) for c in g["cards"]] == cards  # order kept


def test_the_folded_line_is_escaped_and_shows_hidden_characters(sqlite_app):
    hostile = "<img src=x onerror=alert(1)>\u202e"
    cards = [done("web_search", query=hostile), done("web_search", query="b")]
    with sqlite_app.test_request_context():
        html = render_template("partials/_tool_steps.html", cards=cards, step_id=7)
    assert "<img" not in html and "&lt;img src=x" in html
    assert "\u202e" not in html and "U+202E" in html
    assert 'id="steps-7"' in html and html.count('class="tool-group"') == 1
    assert html.count('class="tool-card tool-done"') == 2
