"""Multi-user accounts in real Chromium: log in, change the password in Settings (the other
browser is signed out), repeated wrong passwords are told to wait, and Log out everywhere;
on a desktop and a phone viewport, with the Account section checked by axe-core."""

from __future__ import annotations

import pytest
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

PASSWORD = "the first password"
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.fixture(scope="module")
def accounts_server(live_server_factory):
    server = live_server_factory(
        NUMI_AUTH="multi", NUMI_LOGIN_FREE_ATTEMPTS="2", NUMI_LOGIN_DELAY_SECONDS="600"
    )
    server.cli("user", "create", "alice", "--password-stdin", input=PASSWORD + "\n")
    yield server
    server.stop()


def _page(browser, server, options):
    context = browser.new_context(base_url=server.url, **options)
    page = context.new_page()
    page.set_default_timeout(WAIT_SECONDS * 1000)
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.console_errors = errors
    return page


def _log_in(page, password: str) -> None:
    page.goto("/login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Log in").click()


def test_password_change_log_out_everywhere_and_the_login_limit(browser, accounts_server):
    laptop = _page(browser, accounts_server, DESKTOP)
    phone = _page(browser, accounts_server, PHONE)
    for page in (laptop, phone):
        _log_in(page, PASSWORD)
        page.wait_for_url(accounts_server.url + "/")

    laptop.goto("/settings/account")
    account = laptop.locator("#account")
    account.get_by_label("Current password").fill(PASSWORD)
    account.get_by_label("New password", exact=True).fill("the second password")
    account.get_by_label("Repeat the new password").fill("the second password")
    account.get_by_role("button", name="Change password").click()
    account.get_by_text("Password changed. Your other sessions have ended.").wait_for()
    assert laptop.url.endswith("/settings/account")

    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(laptop, context="#account")
    serious = [
        v["id"]
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]
    assert serious == []

    # The phone's session ended with the password change.
    phone.goto("/settings")
    phone.wait_for_url(lambda url: "/login" in url)

    # Wrong passwords: after the free attempts the login page says to wait, even for the right one.
    for _ in range(3):
        _log_in(phone, "not the password")
        phone.get_by_text("Wrong username or password.").wait_for()
    _log_in(phone, "the second password")
    phone.get_by_role("alert").filter(
        has_text="Too many failed logins. Try again in 10 minutes."
    ).wait_for()

    # Log out everywhere ends the laptop's session too.
    laptop.get_by_role("button", name="Log out everywhere").click()
    laptop.wait_for_url(lambda url: "/login" in url)
    laptop.goto("/")
    laptop.wait_for_url(lambda url: "/login" in url)
    assert laptop.console_errors == []
    for page in (laptop, phone):
        page.context.close()
