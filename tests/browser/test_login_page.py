"""The login page (issue 43): a calm card centred on the page in the product's look, a wrong
password said in words with the username kept, and a login that works without script; in
real Chromium at 1280×800 and 390×844, light and dark, checked by axe-core."""

from __future__ import annotations

import pytest

from page_support import LOOKS, SIZES, serious_violations
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

PASSWORD = "a calm password"


@pytest.fixture(scope="module")
def accounts(live_server_factory):
    server = live_server_factory(NUMI_AUTH="multi", NUMI_LOGIN_FREE_ATTEMPTS="50")
    server.cli("user", "create", "carol", "--password-stdin", input=PASSWORD + "\n")
    yield server
    server.stop()


def _login_page(browser, server, size: str, scheme: str, *, script: bool = True):
    context = browser.new_context(
        viewport=SIZES[size],
        color_scheme=scheme,
        base_url=server.url,
        java_script_enabled=script,
        is_mobile=size == "phone",
        has_touch=size == "phone",
    )
    page = context.new_page()
    page.set_default_timeout(WAIT_SECONDS * 1000)
    page.errors = []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto("/login")
    return page


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_login_page_is_a_centred_card_that_says_what_went_wrong(
    browser, accounts, shot, size, scheme
):
    page = _login_page(browser, accounts, size, scheme)
    try:
        card = page.locator(".auth-card")
        page.get_by_role("heading", name="Log in to Numi").wait_for()
        # Centred across the window, in the page's own colours (a card on a softer ground).
        box, width = card.bounding_box(), SIZES[size]["width"]
        assert abs(box["x"] + box["width"] / 2 - width / 2) <= 1
        assert box["x"] >= 16 and box["y"] > 0
        ground = page.locator(".auth-page").evaluate("el => getComputedStyle(el).backgroundColor")
        assert card.evaluate("el => getComputedStyle(el).backgroundColor") != ground
        username = page.get_by_label("Username")
        assert username.evaluate("el => el === document.activeElement")
        shot(page, f"login-{size}-{scheme}")
        assert serious_violations(page) == []

        username.fill("carol")
        page.get_by_label("Password", exact=True).fill("not the password")
        page.get_by_role("button", name="Log in").click()
        alert = page.get_by_role("alert")
        alert.wait_for()
        assert alert.inner_text() == "Wrong username or password."
        # The username stays; the password is empty, marked and has the focus.
        assert page.get_by_label("Username").input_value() == "carol"
        password = page.get_by_label("Password", exact=True)
        assert password.input_value() == ""
        assert password.get_attribute("aria-invalid") == "true"
        assert password.evaluate("el => el === document.activeElement")
        shot(page, f"login-error-{size}-{scheme}")
        assert serious_violations(page) == []

        password.fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(accounts.url + "/")
        # The refusal's own status (401) is the only thing the console noted.
        assert [e for e in page.errors if "status of 401" not in e] == []
    finally:
        page.context.close()


def test_a_login_needs_no_script(browser, accounts):
    page = _login_page(browser, accounts, "phone", "light", script=False)
    try:
        page.get_by_label("Username").fill("carol")
        page.get_by_label("Password", exact=True).fill("wrong")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("alert").filter(has_text="Wrong username or password.").wait_for()
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(accounts.url + "/")
        assert page.context.cookies()
    finally:
        page.context.close()
