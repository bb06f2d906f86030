"""Real Chromium: an answer longer than NUMI_MARKDOWN_MAX_CHARS shows as plain, escaped text
with a "Show as markdown" control; pressing it renders the answer in place (issue 28, item 5).
At desktop and phone sizes."""

from __future__ import annotations

import pytest
from turn_support import Api

pytestmark = pytest.mark.browser

ANSWER = "## A heading\n\nSome **bold** words and <b>raw tags</b>.\n\n" * 12


@pytest.fixture(scope="module")
def capped_server(live_server_factory):
    return live_server_factory(NUMI_MARKDOWN_MAX_CHARS="500")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_show_as_markdown_renders_a_plain_answer_in_place(capped_server, open_page_on, shot, size):
    doc = {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Long answer"},
        "messages": [
            {"role": "user", "content": "Write a lot"},
            {"role": "assistant", "content": ANSWER},
        ],
    }
    status, body = Api(capped_server.url, token=capped_server.token).post("/api/import", doc)
    assert status == 201, body
    chat_id = body["chats"][0]["id"] if "chats" in body else body["id"]
    page = open_page_on(capped_server, size, "light", f"/c/{chat_id}")
    answer = page.locator("#transcript .msg-assistant")
    plain = answer.locator(".msg-body pre.msg-plain")
    assert (
        "<b>raw tags</b>" in plain.inner_text() and answer.locator(".msg-body strong").count() == 0
    )
    assert plain.evaluate("el => el.scrollWidth <= el.clientWidth"), (
        "plain text wraps, never scrolls sideways"
    )
    button = answer.get_by_role("button", name="Show as markdown")
    assert button.is_visible()
    shot(page, f"plain-answer-{size}")
    button.click()
    answer.locator(".msg-body h4").first.wait_for()
    assert (
        answer.locator(".msg-body strong").count() == 12
        and answer.locator(".msg-body pre.msg-plain").count() == 0
    )
    assert "<b>raw tags</b>" in answer.locator(".msg-body").inner_text(), "raw HTML stays text"
    assert answer.get_by_role("button", name="Show as markdown").count() == 0
    shot(page, f"markdown-answer-{size}")
    assert page.errors == []
