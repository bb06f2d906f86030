"""A temporary chat as a person makes one (headless Chromium, desktop and phone): tick
"Temporary chat" on the home page, ask; the chat says it is temporary at the top and is not
in the sidebar; "Keep this chat" makes it a normal chat, listed in the sidebar."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS, pick_model
from turn_support import Api, make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_temporary_chat_from_the_home_page_and_keeping_it(
    site, scripted, open_page_on, size, scheme, shot
):
    from page_support import serious_violations

    api = Api(site.url, token=site.token)
    endpoint = make_chat(api, scripted, name=f"temporary-{size}")["endpoint"]
    scripted.enqueue(Scenario().text("Off the record."))
    page = open_page_on(site, size, scheme)
    pick_model(page, f"temporary-{size} fake-model")
    expect(page.locator("select[name=route]")).to_have_value(f"{endpoint['id']}:fake-model")
    page.get_by_role("switch", name="Temporary chat").check()
    shot(page, f"temporary-toggle-{size}-{scheme}")
    box = page.get_by_role("textbox", name="Message")
    box.fill("Just between us")
    box.press("Enter")
    page.wait_for_url("**/c/*")
    page.locator(".msg-assistant").get_by_text("Off the record.").wait_for(
        timeout=WAIT_SECONDS * 1000
    )
    chat_id = page.url.rsplit("/", 1)[1]
    banner = page.locator("#temporary-banner")
    assert "Temporary chat." in banner.inner_text()
    assert "It uses none of your memories and saves none." in banner.inner_text()
    assert page.locator(f"#sidebar a[href='/c/{chat_id}']").count() == 0
    shot(page, f"temporary-chat-{size}-{scheme}")
    assert serious_violations(page) == []

    banner.get_by_role("button", name="Keep this chat").click()
    page.locator("#temporary-banner").wait_for(state="detached")
    page.locator(f"#sidebar a[href='/c/{chat_id}']").wait_for(state="attached")
    assert page.locator(".msg-assistant").get_by_text("Off the record.").count() == 1
    assert page.errors == []
