"""Real Chromium: an answer longer than NUMI_MARKDOWN_MAX_CHARS shows as plain, escaped text
with a "Show as markdown" control; pressing it renders the answer in place (issue 28, item 5).
At desktop and phone sizes."""

from __future__ import annotations

import pytest

from import_support import imported_answer

pytestmark = pytest.mark.browser

ANSWER = "## A heading\n\nSome **bold** words and <b>raw tags</b>.\n\n" * 12


@pytest.fixture(scope="module")
def capped_server(live_server_factory):
    return live_server_factory(
        NUMI_MARKDOWN_MAX_CHARS="500", NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS="1000"
    )


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_show_as_markdown_renders_a_plain_answer_in_place(capped_server, open_page_on, shot, size):
    chat_id = imported_answer(capped_server, ANSWER)
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


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_an_answer_past_the_on_request_bound_stays_plain_without_the_button(
    capped_server, open_page_on, shot, size
):
    """Issue 34: "Show as markdown" renders up to NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS; a longer
    answer says so instead of offering a render the server would refuse."""
    chat_id = imported_answer(capped_server, ANSWER * 2)  # past the bound of 1,000 characters
    page = open_page_on(capped_server, size, "light", f"/c/{chat_id}")
    answer = page.locator("#transcript .msg-assistant")
    assert "<b>raw tags</b>" in answer.locator(".msg-body pre.msg-plain").inner_text()
    note = answer.locator(".msg-plain-note")
    assert note.is_visible() and "Too long to show as markdown." in note.inner_text()
    assert answer.get_by_role("button", name="Show as markdown").count() == 0
    shot(page, f"plain-answer-past-bound-{size}")
    assert page.errors == []
