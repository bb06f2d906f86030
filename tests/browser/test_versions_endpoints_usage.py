"""Real headless Chromium, desktop (1280×800) and phone (390×844): switch answer versions
with ‹ › (mouse and keyboard) and find the choice kept after a reload; regenerate in the
page; edit an endpoint in Settings in place; add one and find the form empty again; read
the Usage page."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from page_support import serious_violations, wrapped_texts
from turn_support import Socket, make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def site_env(module_database_url):
    """One server per backend: desktop on SQLite, phone on PostgreSQL (the test below)."""
    return {"NUMI_DATABASE_URL": module_database_url}


def _turn(site, api, chat_id, action) -> None:
    """Run `action()` (which starts a turn) and wait for the turn to end."""
    status, body = api.get(f"/api/chat/stream_status/{chat_id}")
    socket = Socket(site, chat_id)
    socket.send(type="resume", last_event_id=body.get("last_event_id") or 0)
    try:
        action()
        socket.events_until("turn_end")
    finally:
        socket.close()


def _wait_focus(page, label: str) -> None:
    """Wait until the button `label` has the focus and htmx has settled the swap (a key
    pressed while the new content is still settling can reach the plain form instead)."""
    page.wait_for_function(
        "(label) => document.activeElement && document.activeElement.getAttribute('aria-label') === label"
        " && !document.querySelector('.htmx-settling, .htmx-swapping, .htmx-added, .htmx-request')",
        arg=label,
    )


# The in-page regenerate below once lost its answer under load (the turn's events beat the
# transcript's swap); tests/browser/test_transcript_swap.py pins that race down.
# Each size on one backend, each backend at one size: versions, endpoints and usage are
# stored and summed by the API, whose tests run on both (tests/transcript/test_versions.py,
# tests/web/test_usage.py); the page's part does not differ by database.
@pytest.mark.parametrize(
    "module_database_url,viewport",
    [("sqlite", "desktop"), pytest.param("postgres", "phone", marks=pytest.mark.postgres)],
    indirect=["module_database_url"],
    scope="module",
)
def test_versions_endpoint_edit_and_usage(browser, site, api, scripted, viewport, shot):
    chat = make_chat(api, scripted, name=f"scripted-{viewport}")
    chat_id = chat["id"]
    scripted.enqueue(Scenario().text("First answer.").usage(120, 30))
    _turn(
        site,
        api,
        chat_id,
        lambda: Socket(site, chat_id).send(
            type="send", message="Pick a number", request_id=f"v-{viewport}"
        ),
    )
    for text in ("Second answer.", "Third answer."):
        scripted.enqueue(Scenario().text(text).usage(120, 30))
        _turn(site, api, chat_id, lambda: api.post(f"/api/session/{chat_id}/regenerate", {}))

    page = site.open_page(
        browser, viewport=VIEWPORTS[viewport], base_url=site.url
    )  # with the access token
    context = page.context
    page.set_default_timeout(WAIT_SECONDS * 1000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"/c/{chat_id}")
        page.wait_for_selector("#connection[data-state=open]", state="attached")
        answer = page.locator("article.msg-assistant").last
        assert answer.locator(".version-count").inner_text() == "3/3"
        assert answer.locator(".msg-body").inner_text().strip() == "Third answer."
        assert answer.get_by_role("button", name="Next version").is_disabled()

        # Mouse: ‹ shows the second answer; the focus stays on ‹ for the next press.
        answer.get_by_role("button", name="Previous version").click()
        page.wait_for_function("() => document.body.innerText.includes('Second answer.')")
        answer = page.locator("article.msg-assistant").last
        assert answer.locator(".version-count").inner_text() == "2/3"
        assert "Third answer." not in page.locator("#transcript").inner_text()
        _wait_focus(page, "Previous version")  # htmx focuses [autofocus] once the swap settles
        # Keyboard: Enter on the focused ‹.
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.body.innerText.includes('First answer.')")
        answer = page.locator("article.msg-assistant").last
        assert answer.locator(".version-count").inner_text() == "1/3"
        assert answer.get_by_role("button", name="Previous version").is_disabled()
        # At the first version the focus moves to ›, so Enter goes forward again.
        _wait_focus(page, "Next version")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.body.innerText.includes('Second answer.')")
        answer = page.locator("article.msg-assistant").last
        answer.hover()
        shot(page, f"versions-{viewport}")

        # Saved: a reload (or another tab) shows the second answer.
        other = site.open_page(browser, viewport=VIEWPORTS[viewport], base_url=site.url)
        other.goto(f"/c/{chat_id}")
        assert (
            other.locator("article.msg-assistant").last.locator(".msg-body").inner_text().strip()
            == "Second answer."
        )
        assert (
            other.locator("article.msg-assistant").last.locator(".version-count").inner_text()
            == "2/3"
        )
        other.context.close()
        assert serious_violations(page, ".msg-versions") == []

        # Regenerate in the page: the new answer streams in and arrives with its switcher.
        scripted.enqueue(Scenario().text("Fourth answer.", chunks=3).usage(120, 30))
        page.locator("article.msg-assistant").last.hover()
        page.locator("article.msg-assistant").last.locator(
            ".action-regenerate button[type=submit]"
        ).click()
        page.wait_for_function(
            "() => document.body.innerText.includes('Fourth answer.')", timeout=WAIT_SECONDS * 1000
        )
        page.locator("article.msg-assistant .version-count", has_text="4/4").wait_for()
        assert "Second answer." not in page.locator("#transcript").inner_text()

        # Settings: edit the endpoint in place.
        endpoint_id = chat["endpoint"]["id"]
        page.goto("/settings/endpoints")
        card = page.locator(f"#endpoint-{endpoint_id}")
        card.get_by_role("link", name=f"Edit scripted-{viewport}").click()
        form = page.locator(f"form#endpoint-{endpoint_id}")
        form.wait_for()
        assert form.locator("input[name=api_key]").input_value() == ""
        form.locator("input[name=name]").fill(f"Renamed {viewport}")
        form.locator("input[name=default_model]").fill("other-model")
        form.locator("select[name=reasoning_policy]").select_option("strip")
        shot(page, f"endpoint-edit-{viewport}", full_page=True)
        form.get_by_role("button", name="Save").click()
        card = page.locator(f"div#endpoint-{endpoint_id}")
        card.locator(".endpoint-status", has_text="Saved.").wait_for()
        assert card.locator(".endpoint-name").inner_text() == f"Renamed {viewport}"
        assert "default other-model" in card.inner_text()
        endpoint = next(
            e for e in api.get("/api/endpoints")[1]["endpoints"] if e["id"] == endpoint_id
        )
        assert (endpoint["name"], endpoint["reasoning_policy"]) == (f"Renamed {viewport}", "strip")

        # Add an endpoint: the form comes back empty, key included.
        add = page.locator("#endpoint-add-form")
        add.locator("input[name=name]").fill(f"Added {viewport}")
        add.locator("input[name=base_url]").fill("http://127.0.0.1:9/v1")
        add.locator("input[name=api_key]").fill("sk-browser-secret")
        add.locator("input[name=default_model]").fill("added-model")
        add.get_by_role("button", name="Add endpoint").click()
        page.locator(".endpoint-name", has_text=f"Added {viewport}").wait_for()
        add = page.locator("#endpoint-add-form")
        assert [
            add.locator(f"input[name={n}]").input_value()
            for n in ("name", "base_url", "api_key", "default_model")
        ] == ["", "", "", ""]
        assert serious_violations(page, "#endpoint-list", "#endpoint-add-form") == []

        # Usage: the chat's three answers, 360 tokens in and 90 out; by model in place.
        page.goto("/settings")  # the list of sections (on a phone too) leads to Usage
        page.get_by_role("navigation", name="Settings sections").get_by_role(
            "link", name="Usage"
        ).click()
        page.wait_for_url("**/usage")
        row = page.locator(f"#usage-report tbody tr:has(a[href$='/c/{chat_id}'])")
        assert [c.strip() for c in row.locator("td").all_inner_texts()][:3] == ["4", "480", "120"]
        page.get_by_role("radio", name="Model").check()
        page.locator("#usage-report caption", has_text="Tokens by model").wait_for()
        assert "fake-model" in page.locator("#usage-report").inner_text()
        assert "group=model" in page.url
        dates = page.locator("#usage-report caption .usage-date")  # never broken at a hyphen
        assert dates.count() == 2 and wrapped_texts(dates) == []
        shot(page, f"usage-{viewport}", full_page=True)
        assert serious_violations(page, "main") == []
        assert [e for e in errors if "WebSocket" not in e] == []
    finally:
        context.close()
