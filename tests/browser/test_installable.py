"""The installable page in real headless Chromium, at desktop and phone sizes: the manifest
is valid and its icons are served, Chromium finds the page installable, the service worker
controls the page after a reload, a visited chat opens offline with "Reconnecting…" and its
outbox sends once the network is back, and a new release offers "Reload to update"."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from numi.testing import Scenario
from page_support import LOOKS, wait_until_controlled
from server_wait import WAIT_SECONDS
from turn_support import Api, make_chat, turn_server_env

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CONTROLLED = "() => navigator.serviceWorker.controller !== null"


def beyond_offline(errors: list[str]) -> list[str]:
    """Console errors other than those an offline page logs: failed loads, htmx's send
    errors and the WebSocket's error events."""
    expected = ("Failed to load resource", "htmx:sendError", "htmx:afterRequest", "[object Event]")
    return [e for e in errors if not e.startswith(expected)]


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_manifest_is_valid_and_chromium_can_install_the_page(site, open_page_on, size, scheme):
    from PIL import Image

    page = open_page_on(site, size, scheme)
    href = page.locator("link[rel=manifest]").get_attribute("href")
    response = page.request.get(href)
    assert response.ok and response.headers["content-type"] == "application/manifest+json"
    manifest = response.json()
    assert manifest["name"] == "Numi" and manifest["short_name"] == "Numi"
    assert manifest["display"] == "standalone"
    assert manifest["start_url"] == "/" and manifest["scope"] == "/"
    assert manifest["theme_color"] and manifest["background_color"]
    # The dark theme's bar colour comes from the page's theme-color metas.
    metas = page.locator("meta[name=theme-color]")
    assert {metas.nth(i).get_attribute("media") for i in range(metas.count())} == {
        "(prefers-color-scheme: light)",
        "(prefers-color-scheme: dark)",
    }
    seen = set()
    for icon in manifest["icons"]:
        served = page.request.get(icon["src"])
        assert served.ok and served.headers["content-type"] == "image/png"
        image = Image.open(io.BytesIO(served.body()))
        assert f"{image.width}x{image.height}" == icon["sizes"]
        seen.add((icon["sizes"], icon["purpose"]))
    assert {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")} <= seen
    wait_until_controlled(page)
    # What Chromium checks before it offers "Install Numi". Playwright's contexts are
    # incognito, which alone keeps the offer away; nothing else may.
    cdp = page.context.new_cdp_session(page)
    assert cdp.send("Page.getAppManifest")["errors"] == []
    problems = cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
    assert [p["errorId"] for p in problems if p["errorId"] != "in-incognito"] == []
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_visited_chat_opens_offline_and_its_outbox_sends_when_back(
    site, scripted, open_page_on, size, scheme, shot
):
    api = Api(site.url, token=site.token)
    chat = make_chat(api, scripted, name=f"offline-{size}")
    scripted.enqueue(Scenario().text("Kept for the train."))
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    box = page.get_by_role("textbox", name="Message")
    box.fill("Before the tunnel")
    box.press("Enter")
    page.locator(".msg-assistant").get_by_text("Kept for the train.").wait_for(
        timeout=WAIT_SECONDS * 1000
    )

    page.reload()  # the first visit installed the worker; now it controls the page
    assert page.evaluate(CONTROLLED.replace("() => ", ""))
    page.locator(".msg-assistant").get_by_text("Kept for the train.").wait_for()

    assert page.errors == []
    page.context.set_offline(True)
    response = page.reload()
    assert response.from_service_worker
    page.locator(".msg-user").get_by_text("Before the tunnel").wait_for()
    page.locator(".msg-assistant").get_by_text("Kept for the train.").wait_for()
    page.get_by_role("status").get_by_text("Reconnecting…").wait_for()
    # Pages other than chats are never kept: offline, they get the offline note.
    other = page.context.new_page()
    other.goto(site.url + "/settings")
    other.get_by_role("heading", name="Numi is offline").wait_for()
    other.close()

    scripted.enqueue(Scenario().text("Sent after the tunnel."))
    box = page.get_by_role("textbox", name="Message")
    box.fill("Written offline")
    box.press("Enter")
    page.locator("#outbox").get_by_text("Written offline").wait_for()
    shot(page, f"offline-{size}-{scheme}")

    page.context.set_offline(False)
    page.locator(".msg-assistant").get_by_text("Sent after the tunnel.").wait_for(
        timeout=WAIT_SECONDS * 1000
    )
    page.locator("#outbox li").wait_for(state="detached")
    assert [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"] == [
        "Before the tunnel",
        "Written offline",
    ]
    assert beyond_offline(page.errors) == []


def test_an_unvisited_chat_offline_shows_the_offline_note(site, open_page_on):
    page = open_page_on(site, "desktop", "light")
    wait_until_controlled(page)
    page.context.set_offline(True)
    page.goto(site.url + "/c/00000000-0000-4000-8000-000000000000")
    page.get_by_role("heading", name="Numi is offline").wait_for()


def test_nothing_of_the_api_is_cached(site, scripted, open_page_on):
    api = Api(site.url, token=site.token)
    chat = make_chat(api, scripted, name="nocache")
    page = open_page_on(site, "desktop", "light", f"/c/{chat['id']}")
    wait_until_controlled(page)
    page.reload()
    assert page.evaluate(f"fetch('/api/session/{chat['id']}').then(r => r.ok)")
    page.goto(site.url + "/settings")
    listing = """async () => {
        const urls = [];
        for (const name of await caches.keys())
          for (const request of await (await caches.open(name)).keys()) urls.push(new URL(request.url).pathname);
        return urls;
      }"""
    # The worker stores a page after it has answered it: on a busy machine that can come
    # after the next navigation, so wait for the chat to be kept, then look at everything.
    page.wait_for_function(
        f"async () => (await ({listing})()).includes('/c/{chat['id']}')", polling=100
    )
    cached = page.evaluate(listing)
    assert not [u for u in cached if u.startswith(("/api/", "/ws/", "/settings"))], cached
    assert all(u.startswith("/static/") or u == "/" or u.startswith("/c/") for u in cached)


def test_a_new_release_offers_reload_to_update(live_server_factory, tmp_path, browser, shot):
    """A release is new static files: the same server restarted from a copy of the code
    whose stylesheet changed. The open page keeps running the old release until the person
    asks for the new one."""
    release = tmp_path / "release"
    for name in ("numi", "templates", "static", "migrations"):
        shutil.copytree(ROOT / name, release / name, ignore=shutil.ignore_patterns("__pycache__"))
    # A process of its own: the restart imports the release copy first on PYTHONPATH.
    server = live_server_factory(own_process=True, **turn_server_env())
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=server.url)
    try:
        page = context.new_page()
        page.goto(server.auth_url("/"))
        wait_until_controlled(page)
        chat = Api(server.url, token=server.token).post("/api/session", {"title": "Kept"})[1]
        page.goto(f"{server.url}/c/{chat['id']}")  # kept by the worker for offline reading
        page.goto(server.url + "/")
        old_css = page.locator("link[rel=stylesheet][href*='shell.css']").get_attribute("href")
        banner = page.locator("#update-banner")
        assert banner.is_hidden()

        with open(release / "static" / "css" / "app.css", "a") as css:
            css.write("\n/* the next release */\n")
        # The copy comes first on the path; the rest (the tests' plugins) stays.
        server.env["PYTHONPATH"] = os.pathsep.join([str(release), server.env.get("PYTHONPATH", "")])
        server.restart()
        page.evaluate("navigator.serviceWorker.getRegistration().then(r => r.update())")
        banner.get_by_role("button", name="Reload to update").wait_for()
        assert (
            page.locator("link[rel=stylesheet][href*='shell.css']").get_attribute("href") == old_css
        )
        shot(page, "update-offered")
        with page.expect_navigation():
            banner.get_by_role("button", name="Reload to update").click()
        wait_until_controlled(page)
        new_css = page.locator("link[rel=stylesheet][href*='shell.css']").get_attribute("href")
        assert new_css != old_css
        assert page.locator("#update-banner").is_hidden()
        # The chat kept under the old release was fetched again: offline, it opens styled.
        page.wait_for_function(
            """([path, css]) => caches.match(path)
                 .then((r) => r && r.text()).then((html) => !!html && html.includes(css))""",
            arg=[f"/c/{chat['id']}", new_css.replace("&", "&amp;")],
        )
        context.set_offline(True)
        page.goto(f"{server.url}/c/{chat['id']}")
        assert (
            page.locator("link[rel=stylesheet][href*='shell.css']").get_attribute("href") == new_css
        )
        assert page.evaluate("document.styleSheets[0].cssRules.length") > 100
    finally:
        context.close()
        server.stop()
