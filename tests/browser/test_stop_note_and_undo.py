"""Calm chrome (issue 25): a user's own Stop ends the answer with a quiet note rather than a red
error, live and after a reload; a single chat delete (the ✕ on a sidebar chat) offers Undo in
a toast, as a bulk delete does, and so does a message's delete, with no native confirm.
Real Chromium at 1280×800 and 390×844."""

from __future__ import annotations

import uuid

import pytest

from numi.testing import Scenario

from import_support import api_imported_chat
from page_support import LOOKS, open_chat, reveal_sidebar, serious_violations
from turn_support import Api, make_chat

pytestmark = pytest.mark.browser


def looks_quiet(page, selector: str) -> dict:
    """The note's colour against the danger colour, and whether it draws a box."""
    return page.evaluate(
        """(sel) => { const el = document.querySelector(sel), s = getComputedStyle(el);
        const probe = document.createElement('span'); probe.style.color = 'var(--danger)';
        document.body.append(probe); const danger = getComputedStyle(probe).color; probe.remove();
        return {color: s.color, danger, border: s.borderTopWidth, role: el.getAttribute('role')}; }""",
        selector,
    )


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_stopping_an_answer_leaves_a_quiet_note(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"stop-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text(" ".join(f"w{i}" for i in range(200)), chunks=200).delay(0.05), model=model
    )
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    page.fill("#composer-input", "Count slowly")
    page.press("#composer-input", "Enter")
    page.locator(".turn-live .msg-body", has_text="w3").wait_for()
    page.click("#stop-button")

    # Live: a muted note, no red alert box, no Retry.
    note = page.locator("#transcript .msg-stopped[data-code=cancelled]")
    note.wait_for()
    assert "Stopped by the user." in note.inner_text()
    assert page.locator("#transcript .msg-error").count() == 0
    assert note.locator("button").count() == 0
    live = looks_quiet(page, "#transcript .msg-stopped")
    assert live["color"] != live["danger"] and live["border"] == "0px" and live["role"] == "note"
    shot(page, f"stopped-live-{size}-{scheme}")

    # Reload: the saved message shows the same note.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    saved = page.locator("#transcript .msg-stopped[data-code=cancelled]")
    saved.wait_for()
    assert saved.count() == 1 and "Stopped by the user." in saved.inner_text()
    assert page.locator("#transcript .msg-error").count() == 0
    again = looks_quiet(page, "#transcript .msg-stopped")
    assert again["color"] != again["danger"] and again["border"] == "0px"
    shot(page, f"stopped-reloaded-{size}-{scheme}")
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_single_delete_offers_undo(open_page_on, site, api, scripted, shot, size, scheme):
    model = f"undo-{uuid.uuid4().hex[:8]}"
    kept = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{kept['id']}", {"title": f"Kept {model}"})
    doomed = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{doomed['id']}", {"title": f"Doomed {model}"})
    page = open_page_on(site, size, scheme)
    open_chat(page, kept["id"])
    reveal_sidebar(page, size)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    row = page.locator(f"#chat-{doomed['id']}")
    row.hover()
    row.locator(".row-menu-button").click()  # Delete is in the row's "…"
    row.get_by_role("button", name="Delete").click()

    # The chat leaves the list and a toast offers Undo.
    row.wait_for(state="detached")
    toast = page.locator(".toast-undo", has_text="1 chat deleted.")
    toast.wait_for()
    shot(page, f"single-delete-toast-{size}-{scheme}")
    assert serious_violations(page, ".toast-undo") == []
    assert api.call("GET", f"/api/history/{doomed['id']}")[0] == 404

    # Undo brings it back, in the list and for good.
    toast.get_by_role("button", name="Undo").click()
    page.locator(f"#chat-{doomed['id']}").wait_for()
    toast.wait_for(state="detached")
    assert api.call("GET", f"/api/history/{doomed['id']}")[0] == 200
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator(f"#chat-{doomed['id']}").count() == 1
    assert dialogs == [], "Undo, not a native confirm as well"
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_message_delete_offers_undo(open_page_on, site, shot, size, scheme):
    messages = [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Second question"},
        {"role": "assistant", "content": "The answer to undo"},
    ]
    doc = {"format": "numi.chat", "version": 1, "chat": {"title": "Undo"}, "messages": messages}
    api = Api(site.url, token=site.token)
    chat_id = api_imported_chat(api, doc)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat_id)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    answer = page.locator("#transcript .msg-assistant", has_text="The answer to undo")
    answer.click()  # a tap shows a message's actions on a phone; a hover on a desktop
    answer.hover()
    answer.locator(".msg-more > summary").click()  # Delete is in the message's "…" menu
    answer.get_by_role("button", name="Delete").click()

    # It goes at once, no confirm() first; a toast offers Undo.
    answer.wait_for(state="detached")
    toast = page.locator(".toast-undo", has_text="Message deleted.")
    toast.wait_for()
    shot(page, f"message-delete-toast-{size}")
    assert serious_violations(page, ".toast-undo") == []
    assert dialogs == []
    assert [m["content"] for m in api.history(chat_id)][-1] == "Second question"

    toast.get_by_role("button", name="Undo").click()
    page.locator("#transcript .msg-assistant", has_text="The answer to undo").wait_for()
    toast.wait_for(state="detached")
    assert [m["content"] for m in api.history(chat_id)][-1] == "The answer to undo"
    page.reload()
    page.locator("#transcript .msg-assistant", has_text="The answer to undo").wait_for()
    assert page.errors == []
