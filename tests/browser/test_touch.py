"""Real Chromium as a phone with a touch screen (issue 25 item 5), against a desktop with a
mouse: on touch, Enter breaks the line and the send button sends, and neither Stop nor ↓
focuses the message box (which would pop up the keyboard); the placeholder is readable."""

from __future__ import annotations

import uuid

import pytest

from import_support import api_imported_chat

from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS
from turn_support import Api, make_chat

pytestmark = pytest.mark.browser


def _contrast(page, selector: str) -> float:
    """The contrast ratio of the placeholder of `selector` against the page's background."""
    return page.evaluate(
        """(selector) => {
            const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => {
                v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
            const el = document.querySelector(selector);
            const fg = getComputedStyle(el, "::placeholder").color;
            let node = el, bg = "rgba(0, 0, 0, 0)";
            while (node && /rgba\\(.*, 0\\)|transparent/.test(bg)) {
                bg = getComputedStyle(node).backgroundColor;
                node = node.parentElement;
            }
            const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
            return (a + 0.05) / (b + 0.05);
        }""",
        selector,
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_on_a_touch_screen_enter_breaks_the_line_and_nothing_pops_the_keyboard(
    site, open_page_on, scripted, shot, scheme
):
    model = f"touch-{uuid.uuid4().hex[:8]}"
    chat = make_chat(Api(site.url, token=site.token), scripted, model=model)
    scripted.enqueue(Scenario().text("Streaming on.").stall(), model=model)
    page = open_page_on(site, "phone", scheme, f"/c/{chat['id']}", touch=True)
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    box = page.locator("#composer-input")
    box.tap()
    page.keyboard.type("Line one")
    page.keyboard.press("Enter")
    page.keyboard.type("line two")
    assert box.input_value() == "Line one\nline two", "Enter broke the line, sent nothing"
    assert page.locator("#transcript .msg-user").count() == 0
    assert page.locator("#composer-hint").is_hidden()
    assert _contrast(page, "#composer-input") >= 4.5
    page.get_by_role("button", name="Send").tap()
    page.locator("#transcript .msg-user", has_text="line two").wait_for()
    page.locator(".turn-live", has_text="Streaming on.").wait_for()
    page.get_by_role("button", name="Stop the answer").tap()
    page.locator("#send-button").wait_for()
    focused = page.evaluate("document.activeElement.id")
    assert focused != "composer-input", "Stop did not focus the box (no keyboard)"
    shot(page, f"touch-{scheme}")
    assert [e for e in page.errors if "WebSocket" not in e] == []


def test_jump_to_latest_on_a_touch_screen_leaves_the_keyboard_down(site, open_page_on):
    messages = []
    for n in range(30):
        messages += [
            {"role": "user", "content": f"Q{n}"},
            {"role": "assistant", "content": "A.\n\n" * 8},
        ]
    doc = {"format": "numi.chat", "version": 1, "chat": {"title": "Long"}, "messages": messages}
    chat_id = api_imported_chat(Api(site.url, token=site.token), doc)
    page = open_page_on(site, "phone", "light", f"/c/{chat_id}", touch=True)
    transcript = page.locator("#transcript")
    transcript.evaluate("t => { t.scrollTop = 0; t.dispatchEvent(new Event('scroll')); }")
    jump = page.get_by_role("button", name="Jump to the latest message")
    jump.wait_for()
    jump.tap()
    page.wait_for_function(
        "() => { const t = document.getElementById('transcript');"
        " return t.scrollHeight - t.scrollTop - t.clientHeight < 4; }"
    )
    assert page.evaluate("document.activeElement.id") != "composer-input"


def test_with_a_keyboard_and_mouse_enter_sends(site, open_page_on, scripted):
    model = f"desk-{uuid.uuid4().hex[:8]}"
    chat = make_chat(Api(site.url, token=site.token), scripted, model=model)
    scripted.enqueue(Scenario().text("Answered."), model=model)
    page = open_page_on(site, "desktop", "light", f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("#composer-hint").is_visible()  # said until the first send
    page.fill("#composer-input", "Sent by Enter")
    page.press("#composer-input", "Enter")
    page.locator("#transcript .msg-assistant", has_text="Answered.").wait_for()
    page.locator("#send-button").wait_for()
    assert page.locator("#composer-hint").is_hidden()  # once, not on every chat
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("#composer-hint").is_hidden()
    assert _contrast(page, "#composer-input") >= 4.5


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_new_chat_says_only_what_its_screen_can_do(
    site, scripted, open_page_on, shot, size, scheme
):
    """An empty chat names the "?" shortcut only where there is a keyboard, and a chat
    without a model (made by the API; here its endpoint was deleted) says "Model" in a
    phone's narrow header rather than a cut-off "Choose a m…"."""
    api = Api(site.url, token=site.token)
    make_chat(api, scripted, name="kept")  # an endpoint the picker offers
    name = f"gone-{uuid.uuid4().hex[:8]}"
    status, endpoint = api.post(
        "/api/endpoints",
        {"name": name, "kind": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
    )
    assert status == 201, endpoint
    status, chat = api.post("/api/session", {"endpoint_id": endpoint["id"], "model": "m"})
    assert status == 201, chat
    assert api.call("DELETE", f"/api/endpoints/{endpoint['id']}")[0] in (200, 204)
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}", touch=size == "phone")
    button = page.locator("#chat-header .picker-button")
    expect(button).to_have_accessible_name("Model: none chosen")
    # The empty chat greets in one line, with no keyboard hint to hide on a phone.
    expect(page.locator("#empty-chat .shortcuts-hint")).to_have_count(0)
    if size == "phone":
        expect(button.get_by_text("Model", exact=True)).to_be_visible()
        expect(button.get_by_text("Choose a model…")).to_be_hidden()
    else:
        expect(button.get_by_text("Choose a model…")).to_be_visible()
        expect(button.get_by_text("Model", exact=True)).to_be_hidden()
    assert page.evaluate(
        "() => { const b = document.querySelector('#chat-header .picker-button');"
        " return b.scrollWidth <= b.clientWidth; }"
    ), "not cut off"
    shot(page, f"no-model-{size}")
    assert page.errors == []
