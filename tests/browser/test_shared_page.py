"""Real headless Chromium, desktop and phone: the owner shares a chat from its header and
copies the link; a visitor who is signed out opens it and reads the chat, with no controls,
sidebar or scripts; after Revoke in Settings → Shared links the link is a bare 404.
Screenshots are saved under tmp_path."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import make_chat, run_turn

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]
IDS = [f"{size}-{scheme}" for size, scheme in LOOKS]


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_a_shared_chat_opens_signed_out_and_closes_on_revoke(
    open_page_on, browser, site, api, scripted, shot, size, scheme
):
    from page_support import serious_violations

    chat = make_chat(api, scripted, name="share")
    scripted.enqueue(Scenario().text("Paris is the **capital** of France."))
    run_turn(site, chat["id"], "What is the capital of France?")

    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.locator(".chat-share > summary").click()
    form = page.locator(".share-form")
    form.get_by_label("Shown as").fill(f"Ada {size}")
    form.get_by_role("button", name="Create link").click()
    link = page.locator(".share-result .share-url")
    link.wait_for()
    url = link.input_value()
    assert "/s/" in url
    shot(page, f"share-dialog-{size}-{scheme}", both_themes=True)

    visitor = browser.new_context(
        viewport=page.viewport_size, color_scheme=scheme, is_mobile=size == "phone"
    )
    try:
        shared = visitor.new_page()
        response = shared.goto(url)
        assert response.status == 200
        assert response.headers["referrer-policy"] == "no-referrer"
        assert shared.get_by_role("heading", level=1).is_visible()
        assert shared.get_by_text(f"Shared by Ada {size}").is_visible()
        assert shared.locator(".msg-user", has_text="What is the capital of France?").is_visible()
        assert shared.locator("strong", has_text="capital").is_visible()
        assert shared.locator("form, textarea, script, nav, #sidebar").count() == 0
        # Nothing overflows sideways on a phone.
        assert shared.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shot(shared, f"shared-page-{size}-{scheme}", full_page=True, both_themes=True)
        assert serious_violations(shared, "main") == []

        page.goto(f"{site.url}/settings/shared-links")
        row = page.locator(".share-row", has_text=f"Ada {size}")
        row.get_by_role("button", name="Revoke").click()
        row.get_by_text("revoked").wait_for()
        shot(page, f"shared-links-{size}-{scheme}")
        gone = shared.goto(url)
        assert gone.status == 404
        assert shared.locator("body").inner_text().strip() == "Not found"
    finally:
        visitor.close()
