"""The link `numi serve` prints, in a real Chromium profile (issue 28 item 11): a browser
keeps every URL it opens in its History database, whatever the page does afterwards, so the
link must not carry the access token, and the code it carries must open nothing once used."""

from __future__ import annotations

import re
import sqlite3
from urllib.parse import parse_qs, urlsplit

import pytest
from page_support import LOOKS, SIZES
from turn_support import ACCESS_TOKEN
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

PRINTED = re.compile(r"Numi is running on (\S+)")


def _code(url: str) -> str | None:
    return parse_qs(urlsplit(url).query).get("code", [None])[0]


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_the_printed_link_leaves_no_usable_secret_in_the_browser_profile(
    live_server_factory, launch_profile, browser, tmp_path, shot, size, scheme
):
    server = live_server_factory()
    link = PRINTED.search(server.log()).group(1)
    profile = tmp_path / "profile"
    context = launch_profile(profile, viewport=SIZES[size], color_scheme=scheme)
    page = context.pages[0] if context.pages else context.new_page()
    page.set_default_timeout(WAIT_SECONDS * 1000)
    visited: list[str] = []
    page.on("framenavigated", lambda frame: visited.append(frame.url))
    context.on("request", lambda request: visited.append(request.url))

    page.goto(link, wait_until="commit")  # a click on the printed link
    page.wait_for_url(server.url + "/")
    assert page.goto(server.url + "/settings").status == 200  # signed in
    visited.append(page.evaluate("location.href"))
    shot(page, f"signed-in-{size}-{scheme}")
    context.close()  # Chromium writes its History database

    with sqlite3.connect(profile / "Default" / "History") as history:
        recorded = [row[0] for row in history.execute("SELECT url FROM urls")]
    assert recorded and all(url.startswith(server.url) for url in recorded), recorded
    for url in visited + recorded:
        assert ACCESS_TOKEN not in url, url
    # Nowhere in the profile at all: history, session restore, cookies, caches.
    holding = [
        str(path.relative_to(profile))
        for path in profile.rglob("*")
        if path.is_file() and ACCESS_TOKEN.encode() in path.read_bytes()
    ]
    assert holding == []

    # What the history does hold is the link's one-time code, spent: opened again in another
    # browser, it gives the token form and no session.
    codes = {_code(url) for url in visited + recorded} - {None}
    assert codes == {_code(link)}
    stranger = browser.new_context()
    try:
        again = stranger.new_page()
        response = again.goto(link)
        assert response.status == 401
        assert again.get_by_text("used already").is_visible()
        assert again.goto(server.url + "/settings").status == 401
    finally:
        stranger.close()


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_without_its_script_the_link_page_signs_in_with_its_button(
    browser, live_server, shot, size, scheme
):
    """The no-JavaScript way (or a blocked script): the page shows its button; axe finds no
    serious problem in it."""
    from axe_playwright_python.sync_playwright import Axe

    context = browser.new_context(viewport=SIZES[size], color_scheme=scheme)
    try:
        page = context.new_page()
        page.route("**/static/js/sign_in.js*", lambda route: route.abort())
        page.goto(live_server.auth_url("/settings"))
        button = page.get_by_role("button", name="Open Numi")
        assert button.is_visible() and "works once" in page.inner_text("main")
        shot(page, f"sign-in-page-{size}-{scheme}")
        violations = [
            f"{v['id']}: {[n['target'] for n in v['nodes']][:3]}"
            for v in Axe().run(page).response["violations"]
            if v.get("impact") in ("serious", "critical")
        ]
        assert violations == []
        button.click()
        page.wait_for_url(live_server.url + "/settings")
        assert page.get_by_role("heading", name="Settings").first.is_visible()
    finally:
        context.close()
