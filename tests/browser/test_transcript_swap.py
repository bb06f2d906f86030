"""Real headless Chromium: a regenerate answers with the transcript again and starts its
turn once that answer is sent, so the turn's first events can reach the page on the socket
before the page has swapped the transcript in (a loaded machine, a fast model). Whichever
comes first, the page shows the new answer. Each test holds the regenerate's response back
at the browser (the server has sent it, and started the turn) until the page has drawn the
turn from the socket, then lets the swap happen."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Socket, make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}


def _answered_chat(site, api, scripted, name: str) -> str:
    """A chat with one question and its answer, "First answer."."""
    chat_id = make_chat(api, scripted, name=name)["id"]
    scripted.enqueue(Scenario().text("First answer."))
    socket = Socket(site, chat_id)
    try:
        socket.send(type="send", message="Pick a number", request_id=f"{name}-1")
        socket.events_until("turn_end")
    finally:
        socket.close()
    return chat_id


def _open(browser, site, chat_id):
    page = site.open_page(browser, viewport=DESKTOP, base_url=site.url)
    page.set_default_timeout(WAIT_SECONDS * 1000)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(f"/c/{chat_id}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    return page


def _hold_regenerate_until(page, condition: str):
    """Route the regenerate: fetch it from the server (which then starts the turn), wait in
    the page until `condition` holds (the socket has drawn the turn), then deliver it."""
    held = []

    def handle(route):
        response = route.fetch()
        page.wait_for_function(condition)
        held.append(response.status)
        route.fulfill(response=response)

    page.route("**/regenerate", handle)
    return held


def _regenerate(page) -> None:
    answer = page.locator("article.msg-assistant").last
    answer.hover()
    answer.locator(".action-regenerate button[type=submit]").click()


def _settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )


def test_a_turn_that_ends_before_the_swap_stays_on_the_page(browser, site, api, scripted):
    chat_id = _answered_chat(site, api, scripted, "swap-ended")
    page = _open(browser, site, chat_id)
    try:
        scripted.enqueue(Scenario().text("Second answer.", chunks=3))
        held = _hold_regenerate_until(
            page,
            "() => document.querySelector('#transcript .turn:not(:has(.turn-live))"
            " .msg-assistant .msg-body')?.textContent.includes('Second answer.')",
        )
        _regenerate(page)
        page.wait_for_function("() => !document.body.innerText.includes('First answer.')")
        _settled(page)
        assert held == [200]
        transcript = page.locator("#transcript")
        assert transcript.locator("article.msg-assistant").count() == 1
        answer = transcript.locator("article.msg-assistant").last
        assert answer.locator(".msg-body").inner_text().strip() == "Second answer."
        assert answer.locator(".version-count").inner_text() == "2/2"
        assert transcript.locator("article.msg-user").count() == 1
        # Nothing is on the page twice: the carried turn and the swapped-in transcript.
        assert (
            page.evaluate(
                "() => { const ids = [...document.querySelectorAll('#transcript [id]')]"
                ".map((e) => e.id).filter((id) => /^(msg|turn)-/.test(id));"
                " return ids.filter((id, i) => ids.indexOf(id) !== i); }"
            )
            == []
        )
        assert page.errors == []
    finally:
        page.context.close()


def test_a_turn_that_starts_before_the_swap_streams_on_after_it(browser, site, api, scripted, shot):
    chat_id = _answered_chat(site, api, scripted, "swap-running")
    page = _open(browser, site, chat_id)
    try:
        scripted.reset()
        scripted.enqueue(Scenario().text("Second ").stall().text("answer, streamed on."))
        held = _hold_regenerate_until(
            page,
            "() => document.querySelector('#transcript .turn-live')?.textContent.includes('Second')",
        )
        _regenerate(page)
        page.wait_for_function("() => !document.body.innerText.includes('First answer.')")
        _settled(page)
        assert held == [200]
        # The live answer survived the swap: what streams next lands in it.
        assert "Second" in page.locator("#transcript .turn-live").inner_text()
        scripted.release()
        page.locator("#transcript article.msg-assistant .version-count", has_text="2/2").wait_for()
        transcript = page.locator("#transcript")
        assert transcript.locator("article.msg-assistant").count() == 1
        assert (
            transcript.locator("article.msg-assistant .msg-body").inner_text().strip()
            == "Second answer, streamed on."
        )
        assert page.locator("#transcript .turn-live").count() == 0
        assert page.errors == []
        shot(page, "regenerate-carried-through-swap")
    finally:
        scripted.reset()
        page.context.close()
