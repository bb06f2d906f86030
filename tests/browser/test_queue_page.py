"""Issue 11 item 6 in real Chromium at 1280×800 and 390×844: a send while answering is
queued (shown, editable, removable) and runs after; a send while the connection is down
waits in the page's outbox ("waiting to send") and goes out once when it is back."""

from __future__ import annotations

import uuid

import pytest

from numi.testing import Scenario

from page_support import LOOKS, SIZES
from turn_support import Api, db_rows, make_chat, turn_server_env
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


def open_chat(browser_page, server, chat_id, size, scheme):
    page = browser_page(server, viewport=SIZES[size], color_scheme=scheme)
    page.set_default_timeout(WAIT_SECONDS * 1000)
    page.goto(f"{server.url}/c/{chat_id}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    return page


def send(page, text):
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def user_messages(server, chat_id):
    return [
        row[0]
        for row in db_rows(
            server,
            "SELECT content FROM messages WHERE chat_id = ? AND role = 'user' "
            "AND deleted_at IS NULL ORDER BY id",
            chat_id,
        )
    ]


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_send_while_answering_is_queued_and_runs_after(
    browser_page, site, scripted, until, size, scheme, shot
):
    api = Api(site.url, token=site.token)
    model = f"queue-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text("Answer one.").stall(), Scenario().text("Answer two."), model=model
    )
    page = open_chat(browser_page, site, chat["id"], size, scheme)
    send(page, "First question")
    page.locator(".turn-live", has_text="Answer one.").wait_for()
    send(page, "Second question")
    queued = page.locator("#queue .queued", has_text="Second question")
    queued.wait_for()
    assert queued.locator(".queued-label").inner_text() == "Queued"
    assert page.input_value("#composer-input") == ""  # accepted: the composer is free again
    send(page, "Third, to be removed")
    removed = page.locator("#queue .queued", has_text="Third, to be removed")
    removed.wait_for()
    assert page.locator("#stop-clear-button").is_visible()  # offered while something waits
    shot(page, f"queue-{size}")
    removed.get_by_role("button", name="Remove the queued message").click()
    removed.wait_for(state="detached")
    # Edit the waiting one in place.
    queued.locator("summary").click()
    queued.locator("textarea").fill("Second question, edited")
    queued.get_by_role("button", name="Save").click()
    page.locator("#queue .queued", has_text="Second question, edited").wait_for()
    scripted.release()
    page.locator("#transcript .msg-user", has_text="Second question, edited").wait_for()
    page.locator("#transcript .msg-assistant", has_text="Answer two.").wait_for()
    page.locator("#send-button").wait_for()
    assert page.locator("#queue .queued").count() == 0
    assert user_messages(site, chat["id"]) == ["First question", "Second question, edited"]
    assert page.console_errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_stop_and_clear_queue_button(browser_page, site, scripted, size, scheme):
    api = Api(site.url, token=site.token)
    model = f"clear-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Long answer.").stall(), model=model)
    page = open_chat(browser_page, site, chat["id"], size, scheme)
    assert not page.locator("#stop-clear-button").is_visible()
    send(page, "Go")
    page.locator(".turn-live", has_text="Long answer.").wait_for()
    assert not page.locator("#stop-clear-button").is_visible()  # nothing waits yet
    send(page, "Then this")
    page.locator("#queue .queued", has_text="Then this").wait_for()
    page.click("#stop-clear-button")
    page.locator("#send-button").wait_for()
    page.locator("#queue .queued").wait_for(state="detached")
    assert api.get(f"/api/session/{chat['id']}/queue")[1]["items"] == []
    # Had "Then this" survived, it would be answered before the next send.
    scripted.enqueue(Scenario().text("Answered."), Scenario().text("Answered again."), model=model)
    send(page, "Afterwards")
    page.locator("#transcript .msg-assistant", has_text="Answered").wait_for()
    page.locator("#send-button").wait_for()
    assert user_messages(site, chat["id"]) == ["Go", "Afterwards"]
    assert page.console_errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_send_while_offline_waits_and_goes_out_once(
    browser_page, live_server_factory, scripted, until, size, scheme, shot
):
    server = live_server_factory(**turn_server_env())
    api = Api(server.url, token=server.token)
    model = f"offline-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Back online."), model=model)
    page = open_chat(browser_page, server, chat["id"], size, scheme)
    server.stop()
    page.get_by_role("status").filter(has_text="Reconnecting…").wait_for()
    send(page, "Sent while offline")
    waiting = page.locator("#outbox .queued", has_text="Sent while offline")
    waiting.wait_for()
    assert waiting.locator(".queued-label").inner_text() == "Waiting to send"
    assert page.input_value("#composer-input") == ""
    stored = page.evaluate(f"() => JSON.parse(localStorage.getItem('numi:outbox:{chat['id']}'))")
    assert [m["message"] for m in stored] == ["Sent while offline"] and stored[0]["request_id"]
    shot(page, f"outbox-{size}")
    server.start()
    page.locator("#transcript .msg-assistant", has_text="Back online.").wait_for(
        timeout=WAIT_SECONDS * 1000
    )
    waiting.wait_for(state="detached")
    assert page.evaluate(f"() => localStorage.getItem('numi:outbox:{chat['id']}')") == "[]"
    # Once: a reload (and its reconnect) sends nothing again.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.locator("#transcript .msg-assistant", has_text="Back online.").wait_for()
    assert user_messages(server, chat["id"]) == ["Sent while offline"]
    assert len(scripted.requests) == 1
    # The only errors are the browser's reports of the connections lost while it was down:
    # refused while stopped, or reset/empty when the stop cut one in flight (a sidebar poll,
    # a keep-alive). htmx reports the sidebar poll it could not send as sendError/afterRequest.
    lost = (
        "WebSocket",
        "[object Event]",
        "ERR_CONNECTION_REFUSED",
        "ERR_CONNECTION_RESET",
        "ERR_EMPTY_RESPONSE",
        "htmx:sendError",
        "htmx:afterRequest",
    )
    assert [e for e in page.console_errors if not any(mark in e for mark in lost)] == []


def test_the_outbox_survives_a_reload(browser, live_server_factory, scripted):
    server = live_server_factory(**turn_server_env())
    api = Api(server.url, token=server.token)
    model = f"reload-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Kept and sent."), model=model)
    context = browser.new_context(viewport=SIZES["desktop"])  # two pages share its storage
    try:
        page = context.new_page()
        server.sign_in(page, f"/c/{chat['id']}")
        page.wait_for_selector("#connection[data-state=open]", state="attached")
        server.stop()
        page.get_by_role("status").filter(has_text="Reconnecting…").wait_for()
        send(page, "Written before the reload")
        page.locator("#outbox .queued", has_text="Written before the reload").wait_for()
        page.close()  # this page never reconnects: the next one must find the message in storage
        server.start()
        again = context.new_page()
        again.goto(f"{server.url}/c/{chat['id']}")
        again.locator("#transcript .msg-assistant", has_text="Kept and sent.").wait_for(
            timeout=WAIT_SECONDS * 1000
        )
        assert again.locator("#outbox .queued").count() == 0
        assert user_messages(server, chat["id"]) == ["Written before the reload"]
    finally:
        context.close()
