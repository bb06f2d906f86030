"""Settings over the chat (issue 43) in real Chromium at 1280×800 and 390×844, light and dark:
the sidebar's Settings opens a dialog over the chat (a full-screen sheet on a phone) at the
section's own URL, another section replaces the shown one, and Esc, × or Back return to the
chat where it was; the same URL loaded directly is the page itself. axe covers the dialog."""

from __future__ import annotations

import pytest

from import_support import api_imported_chat

from page_support import LOOKS, SIZES, open_chat, reveal_sidebar, serious_violations

pytestmark = pytest.mark.browser


def long_chat(api) -> str:
    messages = []
    for n in range(12):
        messages.append({"role": "user", "content": f"Question {n}?"})
        messages.append({"role": "assistant", "content": f"Answer {n}.\n\n" + "A line.\n\n" * 6})
    doc = {"format": "numi.chat", "version": 1, "chat": {"title": "Long"}, "messages": messages}
    return api_imported_chat(api, doc)


def open_settings(page, size: str):
    reveal_sidebar(page, size)
    page.locator("#sidebar").get_by_role("link", name="Settings").click()
    overlay = page.get_by_role("dialog", name="Settings")
    overlay.wait_for()
    frame = page.frame_locator("#settings-overlay iframe")
    frame.get_by_role("heading", name="Settings", level=1).wait_for()
    return overlay, frame


def transcript_scroll(page) -> int:
    return page.evaluate("() => Math.round(document.getElementById('transcript').scrollTop)")


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_settings_open_over_the_chat_and_close_back_to_it(
    open_page_on, site, api, shot, size, scheme
):
    chat_id = long_chat(api)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat_id)
    page.locator("#transcript").get_by_text("Answer 11.").wait_for()
    page.evaluate("() => { document.getElementById('transcript').scrollTop = 400; }")
    page.wait_for_function("() => document.getElementById('transcript').scrollTop > 0")
    scrolled = transcript_scroll(page)
    chat_url = page.url
    steps = page.evaluate("() => history.length")

    overlay, frame = open_settings(page, size)
    assert page.url == site.url + "/settings"
    box, view = overlay.bounding_box(), SIZES[size]
    if size == "desktop":  # a panel over the dimmed chat, centred
        assert box["width"] < view["width"] - 100 and box["height"] < view["height"]
        assert abs(box["x"] + box["width"] / 2 - view["width"] / 2) <= 2
    else:  # a full-screen sheet
        assert box["width"] == view["width"] and box["height"] == view["height"]
    # Another section replaces the shown one: the address follows, Back does not collect them.
    section = "Appearance" if size == "phone" else "Voice"
    frame.get_by_role("link", name=section, exact=True).click()
    frame.get_by_role("heading", name=section, level=2).wait_for()
    page.wait_for_url(lambda url: url.endswith("/settings/" + section.lower()))
    assert page.evaluate("() => history.length") == steps + 1
    shot(page, f"settings-overlay-{size}-{scheme}", both_themes=True)
    assert serious_violations(page, "#settings-overlay") == []

    # Esc: the chat as it was, at its own address, scrolled where it was.
    frame.get_by_role("heading", name=section, level=2).click()
    page.keyboard.press("Escape")
    overlay.wait_for(state="hidden")
    page.wait_for_url(chat_url)
    assert transcript_scroll(page) == scrolled
    if size == "desktop":
        assert page.evaluate("() => document.activeElement.matches('a.settings-link')")

    # × closes it, and so does the browser's Back.
    _, frame = open_settings(page, size)
    frame.get_by_role("link", name="Close settings").click()
    overlay.wait_for(state="hidden")
    page.wait_for_url(chat_url)
    open_settings(page, size)
    page.go_back()
    overlay.wait_for(state="hidden")
    assert page.url == chat_url and transcript_scroll(page) == scrolled
    assert page.errors == []


def test_a_settings_address_opened_directly_is_the_page_itself(open_page_on, site):
    page = open_page_on(site, "desktop", "light", "/settings/voice")
    page.get_by_role("heading", name="Voice", level=2).wait_for()
    assert page.locator("#settings-overlay").count() == 0
    assert page.get_by_role("link", name="← Back to chats").is_visible()
    assert page.get_by_role("link", name="Close settings").is_hidden()
    assert page.errors == []
