"""Whose pages the service worker serves offline, in real headless Chromium (desktop and
phone): the second person on the same browser profile never sees the first one's chat
offline, whether the first session ended elsewhere ("Log out everywhere") or the browser's
cookies changed under the worker (another sign-in, an expired session); the first person's
own chat still opens offline. A temporary chat is never kept: discarded, it does not open
offline."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from page_support import LOOKS, open_signed_in_page, wait_until_controlled
from turn_support import make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

INSTALLED = WAIT_SECONDS * 1000  # installing the worker fetches the whole app shell first
PASSWORD = "a long enough password"
KEPT = """(path) => caches.keys().then(async (names) => {
    for (const name of names) if (await (await caches.open(name)).match(path)) return true;
    return false;
  })"""


@pytest.fixture(scope="module")
def shared(live_server_factory):
    """A multi-user server with two people who share a browser profile."""
    server = live_server_factory(NUMI_AUTH="multi")
    for name in ("alice", "bob"):
        server.cli("user", "create", name, "--password-stdin", input=PASSWORD + "\n")
    yield server
    server.stop()


def log_in(page, username: str) -> None:
    page.goto("/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login" not in url)


def profile(browser, server, size: str, scheme: str = "light"):
    """A fresh browser profile on the login page."""
    return open_signed_in_page(browser, server, size, scheme, "/login", timeout=WAIT_SECONDS * 1000)


def alice_chat_kept_offline_ready(page) -> str:
    """Alice signs in, opens her chat (the worker keeps it) and it opens offline; returns
    its path."""
    log_in(page, "alice")
    # The worker may activate after this page loaded; the next navigation goes through it.
    page.wait_for_function(
        "() => navigator.serviceWorker.ready.then(() => true)", timeout=INSTALLED
    )
    response = page.request.post("/api/session", data={"title": "Alice's surprise party plan"})
    assert response.status == 201, response.text()
    path = f"/c/{response.json()['id']}"
    page.goto(path)
    page.wait_for_function(KEPT, arg=path)
    return path


def offline_shows_the_note(page, path: str) -> None:
    page.context.set_offline(True)
    page.goto(path)
    page.get_by_role("heading", name="Numi is offline").wait_for()
    assert "surprise party" not in page.content()
    assert not page.evaluate(KEPT, path)
    page.context.set_offline(False)


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_next_person_never_sees_the_last_ones_chat_offline(browser, shared, size, scheme, shot):
    """The repro of issue 34: Alice's session ends elsewhere, Bob signs in on the same
    browser profile and goes offline, and opens the address of Alice's chat."""
    page = profile(browser, shared, size, scheme)
    try:
        path = alice_chat_kept_offline_ready(page)
        page.goto(path + "?at=1")  # opened on a message: the kept copy stays
        assert page.evaluate(KEPT, path)
        page.context.set_offline(True)
        assert page.goto(path).from_service_worker  # her own chat, offline: kept for her
        page.get_by_text("Alice's surprise party plan").first.wait_for(state="attached")
        page.context.set_offline(False)

        elsewhere = profile(browser, shared, "desktop")
        log_in(elsewhere, "alice")
        elsewhere.goto("/settings/account")
        elsewhere.get_by_role("button", name="Log out everywhere").click()
        elsewhere.wait_for_url(lambda url: "/login" in url)
        elsewhere.context.close()

        page.goto("/")  # her session is over: the login page
        page.wait_for_url(lambda url: "/login" in url)
        log_in(page, "bob")
        offline_shows_the_note(page, path)
        shot(page, f"offline-next-person-{size}-{scheme}")
    finally:
        page.context.close()


def test_the_worker_serves_no_kept_page_to_another_or_an_ended_session(browser, shared):
    """The browser's cookies change without a page the worker sees: it checks, offline,
    that the session is still the one that kept the page."""
    page = profile(browser, shared, "desktop")
    bob = profile(browser, shared, "phone")
    try:
        path = alice_chat_kept_offline_ready(page)
        log_in(bob, "bob")
        # Bob's session cookies replace Alice's, as another sign-in leaves them.
        page.context.add_cookies(bob.context.cookies())
        offline_shows_the_note(page, path)

        path = alice_chat_kept_offline_ready(page)
        page.context.clear_cookies()  # her session expired: the browser dropped its cookies
        offline_shows_the_note(page, path)
    finally:
        page.context.close()
        bob.context.close()


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_discarded_temporary_chat_does_not_open_offline(
    site, api, scripted, open_page_on, size, scheme, shot
):
    endpoint = make_chat(api, scripted, name=f"temporary-offline-{size}")["endpoint"]
    status, chat = api.post(
        "/api/session", {"endpoint_id": endpoint["id"], "model": "fake-model", "temporary": True}
    )
    assert status == 201
    scripted.enqueue(Scenario().text("The code is under the doormat."))
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    wait_until_controlled(page)
    page.reload()  # now through the worker
    box = page.get_by_role("textbox", name="Message")
    box.fill("Where is the spare key?")
    box.press("Enter")
    page.locator(".msg-assistant").get_by_text("The code is under the doormat.").wait_for(
        timeout=WAIT_SECONDS * 1000
    )
    page.reload()
    page.locator(".msg-assistant").get_by_text("The code is under the doormat.").wait_for()
    assert not page.evaluate(KEPT, f"/c/{chat['id']}")

    api.post("/api/session", {"title": "Next"})  # discards the temporary chat
    page.context.set_offline(True)
    page.goto(f"/c/{chat['id']}")
    page.get_by_role("heading", name="Numi is offline").wait_for()
    assert "doormat" not in page.content() and "spare key" not in page.content()
    shot(page, f"offline-temporary-{size}-{scheme}")
