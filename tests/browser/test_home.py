"""The home page as a person uses it (real headless Chromium, desktop and phone): type the
first question where you land, Shift+Enter for a new line, Enter to send; the page moves to
the new chat and the answer streams in; the sidebar lists the chat."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS, pick_model
from turn_support import Api, make_chat

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_first_question_is_typed_on_the_home_page(
    site, scripted, open_page_on, size, scheme, shot
):
    api = Api(site.url, token=site.token)
    endpoint = make_chat(api, scripted, name=f"home-{size}")["endpoint"]
    scripted.enqueue(Scenario().text("Hello from **home**."))
    page = open_page_on(site, size, scheme)
    box = page.get_by_role("textbox", name="Message")
    assert box.evaluate("el => el === document.activeElement")  # ready to type on arrival
    pick_model(page, f"home-{size} fake-model")
    expect(page.locator("select[name=route]")).to_have_value(f"{endpoint['id']}:fake-model")
    box.click()
    box.type("First line")
    box.press("Shift+Enter")
    box.type("second line")
    shot(page, f"home-{size}")
    box.press("Enter")
    page.wait_for_url("**/c/*")
    page.locator(".msg-assistant").get_by_text("Hello from").wait_for()
    assert "First line\nsecond line" in page.locator(".msg-user").first.inner_text()
    assert page.locator(".msg-assistant strong").inner_text() == "home"
    chat_id = page.url.rsplit("/", 1)[1]
    assert page.locator(f"#sidebar a[href='/c/{chat_id}']").count() == 1
    assert (
        scripted.wait_for_requests(1).body["messages"][-1]["content"] == "First line\nsecond line"
    )
    shot(page, f"home-sent-{size}")
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_suggestions_fill_the_composer_and_never_send(
    site, scripted, open_page_on, size, scheme, shot
):
    """The greeting's suggestion chips, on the home page and in an empty chat: a click puts
    the starter in the message box, focused, caret at its end, and sends nothing. With saved
    prompts, the chips are those prompts (their titles; escaped, as any user text)."""
    api = Api(site.url, token=site.token)
    chat = make_chat(api, scripted, name=f"chips-{size}-{scheme}")
    page = open_page_on(site, size, scheme)
    chips = page.get_by_role("group", name="Suggestions")
    expect(chips.get_by_role("button")).to_have_count(4)
    shot(page, f"home-{size}-{scheme}", both_themes=True)
    chips.get_by_role("button", name="Plan a trip").click()
    box = page.locator("#home-input")
    expect(box).to_have_value("Plan a three-day trip to ")
    expect(box).to_be_focused()
    assert box.evaluate("el => el.selectionStart === el.value.length")
    assert page.url.endswith("/")  # nothing was sent: still home

    page.goto(f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    chips = page.locator("#empty-chat").get_by_role("group", name="Suggestions")
    chips.get_by_role("button", name="Summarise a text").click()
    composer = page.locator("#composer-input")
    expect(composer).to_have_value("Summarise the main points of this text:\n\n")
    expect(composer).to_be_focused()
    shot(page, f"empty-chat-{size}-{scheme}", both_themes=True)
    # Not sent: after a reload the words are still a draft in the box, and the chat is empty.
    page.reload()
    expect(page.locator("#composer-input")).to_have_value(
        "Summarise the main points of this text:\n\n"
    )
    expect(page.locator("#empty-chat")).to_be_visible()
    assert page.locator("#transcript .msg").count() == 0
    assert page.errors == []
