"""Settings in sections, as a person finds their way around them in real headless Chromium at
1280×800 and 390×844, light and dark: a sidebar of sections at desktop size and a list on a
phone, each section at its own URL, the way back, "Add one in Settings" straight to
Endpoints, the Usage table on a phone, and axe on every section."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from numi.web.pages.settings import SECTIONS

from page_support import LOOKS
from turn_support import Socket, make_chat, turn_server_env

pytestmark = pytest.mark.browser


def fits(page) -> bool:
    """No horizontal scrolling of the page (a phone's 390 px included)."""
    return page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_desktop_settings_have_a_sidebar_of_sections_each_at_its_own_url(
    open_page_on, site, api, scripted, scheme, shot
):
    from page_support import serious_violations

    make_chat(api, scripted)  # an endpoint to list
    page = open_page_on(site, "desktop", scheme, "/settings")
    nav = page.get_by_role("navigation", name="Settings sections")
    expect(nav.get_by_role("link")).to_have_text([*SECTIONS.values(), "Tasks", "Usage"])
    # /settings is the list beside the first section.
    expect(page.get_by_role("heading", level=2)).to_have_text("Appearance")
    assert page.get_by_label("Dark").is_visible()
    shot(page, f"settings-index-desktop-{scheme}")

    found = {}
    for slug, title in SECTIONS.items():
        nav.get_by_role("link", name=title, exact=True).click()
        page.wait_for_url(f"**/settings/{slug}")
        expect(page.get_by_role("heading", level=2)).to_have_text(title)
        expect(nav.locator("[aria-current=page]")).to_have_text(title)
        assert nav.is_visible() and fits(page), slug
        found[slug] = serious_violations(page)
        shot(page, f"settings-{slug}-desktop-{scheme}", full_page=True)
    assert {slug: problems for slug, problems in found.items() if problems} == {}

    # A form is found where it now lives: the endpoint list and its Add form.
    page.goto("/settings/endpoints")
    assert page.locator("#endpoint-list .endpoint").count() >= 1
    assert page.get_by_label("Base URL").is_visible()
    page.get_by_role("link", name="← Back to chats").click()
    page.wait_for_url(site.url + "/")
    assert page.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_phone_shows_the_list_then_one_section_with_a_way_back(open_page_on, site, scheme, shot):
    from page_support import serious_violations

    page = open_page_on(site, "phone", scheme, "/settings")
    nav = page.get_by_role("navigation", name="Settings sections")
    expect(nav.get_by_role("link")).to_have_text([*SECTIONS.values(), "Tasks", "Usage"])
    # The list alone, as on a phone's settings screen: no section under it.
    assert not page.get_by_role("heading", level=2).is_visible()
    assert page.get_by_role("heading", name="Settings", level=1).is_visible()
    assert fits(page)
    shot(page, f"settings-list-phone-{scheme}")
    assert serious_violations(page) == []

    found = {}
    for slug, title in SECTIONS.items():
        nav.get_by_role("link", name=title, exact=True).click()
        page.wait_for_url(f"**/settings/{slug}")
        expect(page.get_by_role("heading", level=2)).to_have_text(title)
        assert not nav.is_visible(), "a section has the screen to itself"
        assert fits(page), slug
        found[slug] = serious_violations(page)
        shot(page, f"settings-{slug}-phone-{scheme}", full_page=True)
        page.get_by_role("link", name="← Settings").click()
        page.wait_for_url("**/settings")
        expect(nav).to_be_visible()
    assert {slug: problems for slug, problems in found.items() if problems} == {}
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_add_one_in_settings_goes_straight_to_endpoints(
    open_page_on, live_server_factory, size, scheme, shot
):
    fresh = live_server_factory(**turn_server_env())  # no endpoint yet
    try:
        page = open_page_on(fresh, size, scheme, "/")
        page.get_by_role("link", name="Add one in Settings").click()
        page.wait_for_url("**/settings/endpoints")
        expect(page.get_by_role("heading", level=2)).to_have_text("Endpoints")
        expect(page.get_by_text("No endpoints yet.")).to_be_visible()
        name = page.locator("#endpoint-add-form").get_by_label("Name")
        expect(name).to_be_visible()
        shot(page, f"add-one-in-settings-{size}-{scheme}")
        assert page.errors == []
    finally:
        fresh.stop()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_usage_table_fits_a_phone(open_page_on, site, api, scripted, scheme, shot):
    from page_support import serious_violations

    model = f"a-rather-long-model-name-for-a-phone-2026-12-02-{scheme}"
    chat = make_chat(api, scripted, model=model)
    title = f"A long chat title about planning the whole family's summer trip ({scheme})"
    api.call("PATCH", f"/api/session/{chat['id']}", {"title": title})
    scripted.enqueue(Scenario().text("Sure.").usage(1_234_567, 89_012), model=model)
    sock = Socket(site, chat["id"])
    try:
        sock.send(type="send", message="Plan it", request_id=f"usage-{scheme}")
        sock.events_until("turn_end")
    finally:
        sock.close()

    page = open_page_on(site, "phone", scheme, "/usage")
    report = page.locator("#usage-report")
    expect(report.get_by_role("link", name=title)).to_be_visible()
    # The table itself fits: no sideways scrolling of the page or of the table.
    shot(page, f"usage-phone-{scheme}", full_page=True)
    assert fits(page)
    assert report.evaluate("(el) => el.scrollWidth <= el.clientWidth")
    page.get_by_role("radio", name="Model").check()
    expect(report.locator("caption")).to_contain_text("Tokens by model")
    expect(report.get_by_text(model)).to_be_visible()
    assert fits(page) and report.evaluate("(el) => el.scrollWidth <= el.clientWidth")
    shot(page, f"usage-by-model-phone-{scheme}", full_page=True)
    assert serious_violations(page) == []
    assert page.errors == []
