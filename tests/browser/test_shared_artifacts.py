"""Real headless Chromium, desktop and phone: a visitor signed out opens a shared chat whose
answer holds an HTML artifact, opens its Preview, and the artifact runs in the frame's
sandbox (its script runs, the page and its cookie stay out of its reach); the shared page
itself still runs no script. Screenshots are saved under tmp_path."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import make_chat, run_turn

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]
IDS = [f"{size}-{scheme}" for size, scheme in LOOKS]

ARTIFACT = (
    "<h1>Counter</h1><p id=out>not run</p><script>"
    "var reach; try { reach = String(window.parent.document.cookie); } catch (e) { reach = 'blocked'; }"
    "document.getElementById('out').textContent = 'ran, page ' + reach;</script>"
)


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_an_artifact_previews_on_a_shared_page_in_its_sandbox(
    browser, site, api, scripted, shot, size, scheme
):
    chat = make_chat(api, scripted, name="share-artifact")
    scripted.enqueue(Scenario().text(f"A page for you:\n\n```html\n{ARTIFACT}\n```\n"))
    run_turn(site, chat["id"], "Make me a page")
    status, body = api.post(f"/api/session/{chat['id']}/share", {"display_name": "Ada"})
    assert status == 201, body

    visitor = browser.new_context(
        viewport={"width": 1280, "height": 900}
        if size == "desktop"
        else {"width": 390, "height": 844},
        color_scheme=scheme,
        is_mobile=size == "phone",
    )
    try:
        page = visitor.new_page()
        assert page.goto(body["url"]).status == 200
        assert page.locator("script").count() == 0
        preview = page.locator(".shared-artifact > summary", has_text="Preview HTML")
        preview.click()
        frame = page.frame_locator("iframe.shared-artifact-frame")
        frame.get_by_role("heading", name="Counter").wait_for()
        frame.get_by_text(
            "ran, page blocked"
        ).wait_for()  # its script ran; the page is out of reach
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shot(page, f"shared-artifact-{size}-{scheme}", full_page=True)
    finally:
        visitor.close()
