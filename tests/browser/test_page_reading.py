"""The chat page while reading and answering, in real headless Chromium at 1280×800 and
390×844, light and dark: keyboard shortcuts and focus, titles (auto-title, rename, other
tabs), deleting the open chat, paging up a long chat, jump to latest, the model picker, what
screen readers hear, reconnecting, and an axe-core check of every view.

One live server for the module (`site`, tests/browser/conftest.py), one browser; each test
opens its own context.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest

from numi.testing import Scenario

from page_support import (
    LOOKS,
    SIZES,
    open_chat,
    reveal_sidebar,
    send,
    serious_violations,
    unique_model,
)
from turn_support import Api, make_chat, turn_server_env
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_keyboard_stop_edit_shortcuts_and_menus(open_page, api, scripted, size, scheme):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text(" ".join(f"w{i}" for i in range(200)), chunks=200).delay(0.05), model=model
    )
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    send(page, "Count slowly")
    page.locator("#stop-button").wait_for()
    page.locator(".turn-live .msg-body", has_text="w3").wait_for()
    page.click("#stop-button")  # focus is on Stop when the turn ends ...
    page.locator(".msg-stopped[data-code=cancelled]").wait_for()
    page.locator("#send-button").wait_for()
    page.wait_for_function(
        "() => document.activeElement.id === 'composer-input'"
    )  # ... then on the composer

    # ArrowUp in the empty composer edits the last question, with focus in the edit field.
    page.press("#composer-input", "ArrowUp")
    page.wait_for_function("() => document.activeElement.classList.contains('edit-text')")
    assert page.evaluate("() => document.activeElement.value") == "Count slowly"
    page.keyboard.press("Escape")
    page.locator(".msg-editing").wait_for(state="detached")

    # Esc stops a running turn from the composer.
    scripted.enqueue(
        Scenario().text(" ".join(f"v{i}" for i in range(200)), chunks=200).delay(0.05), model=model
    )
    send(page, "Again, slowly")
    page.locator(".turn-live .msg-body", has_text="v3").wait_for()
    page.focus("#composer-input")
    page.keyboard.press("Escape")
    page.locator(".msg-stopped[data-code=cancelled]").nth(1).wait_for()
    page.locator("#send-button").wait_for()

    # `?` lists the shortcuts (not while typing); closing the dialog returns focus to its opener.
    page.focus("#composer-input")
    page.keyboard.press("?")
    assert page.input_value("#composer-input") == "?"
    page.fill("#composer-input", "")
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.focus(".chat-export summary")
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    dialog.wait_for()
    assert "Ctrl/⌘ + K" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Export"

    # Export (in the "…" menu): Esc closes it and focus returns to its row; an outside click
    # closes every menu.
    page.click(".chat-export summary")
    page.locator(".export-menu").wait_for()
    page.keyboard.press("Escape")
    page.locator(".export-menu").wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Export"
    page.click(".chat-export summary")
    page.locator(".export-menu").wait_for()
    page.mouse.click(SIZES[size]["width"] // 2, SIZES[size]["height"] // 2)
    page.locator(".export-menu").wait_for(state="hidden")

    # Ctrl+K searches (on a phone it opens the drawer first); Ctrl+Shift+O starts a chat.
    page.focus("#composer-input")
    page.keyboard.press("Control+k")
    page.wait_for_function("() => document.activeElement.id === 'chat-search'")
    assert page.locator("#chat-search").is_visible()
    page.keyboard.press("Escape")  # closes the search back to its icon
    assert not page.locator("#chat-search").is_visible()
    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(lambda url: chat["id"] not in url and "/c/" in url)
    assert page.errors == []


# --- item 9: titles, deleting, paging, jump to latest, the model picker -----------------------


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_titles_follow_auto_title_rename_and_other_tabs(open_page, api, scripted, size, scheme):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Sure."), model=model)
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    other_tab = page.context.new_page()
    other_tab.goto(f"/c/{chat['id']}")
    other_tab.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.title() == "New chat · Numi"

    send(page, "Plan a trip to Lisbon")
    page.wait_for_function(
        "() => document.title === 'Plan a trip to Lisbon · Numi'"
    )  # the automatic title
    assert page.locator("#chat-title").inner_text() == "Plan a trip to Lisbon"
    other_tab.wait_for_function("() => document.title === 'Plan a trip to Lisbon · Numi'")

    reveal_sidebar(page, size)
    item = page.locator(f"#chat-{chat['id']}")
    item.locator(".row-menu-button").click()
    item.get_by_role("button", name="Rename").click()
    field = item.locator("input[name=title]")
    field.fill("Lisbon in May")
    field.press("Enter")
    page.wait_for_function("() => document.title === 'Lisbon in May · Numi'")
    # The field is gone; focus is on the renamed chat's link, not lost.
    page.wait_for_function("() => document.activeElement.classList.contains('chat-link')")
    assert page.locator("#chat-title").inner_text() == "Lisbon in May"
    other_tab.wait_for_function("() => document.title === 'Lisbon in May · Numi'")
    assert other_tab.locator("#chat-title").inner_text() == "Lisbon in May"
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_deleting_the_open_chat_opens_the_next_one(open_page, api, scripted, size, scheme, shot):
    model = unique_model()
    older = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{older['id']}", {"title": f"Keep {model}"})
    doomed = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{doomed['id']}", {"title": f"Doomed {model}"})
    page = open_page(size, scheme)
    open_chat(page, doomed["id"])
    reveal_sidebar(page, size)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    row = page.locator(f"#chat-{doomed['id']}")
    row.locator(".row-menu-button").click()  # the open chat's "…" is always shown
    row.get_by_role("button", name="Delete").click()
    page.wait_for_url(lambda url: "/c/" in url and doomed["id"] not in url.split("?")[0])
    assert page.locator("#chat-title").is_visible()  # a live chat, not a 404
    assert page.locator(f"#chat-{doomed['id']}").count() == 0
    # No native confirm: the next chat's page offers Undo, which lists the chat again.
    assert dialogs == []
    toast = page.locator(".toast-undo", has_text="1 chat deleted.")
    toast.wait_for()
    shot(page, f"open-chat-deleted-{size}")
    toast.get_by_role("button", name="Undo").click()
    reveal_sidebar(page, size)
    page.locator(f"#chat-{doomed['id']}").wait_for()
    assert api.get(f"/api/history/{doomed['id']}")[0] == 200
    assert page.errors == []


@pytest.fixture(scope="module")
def long_chat(site):
    """A chat of 240 messages (five pages), written straight into the database."""
    api = Api(site.url, token=site.token)
    status, chat = api.post("/api/session", {"title": "Long read"})
    assert status == 201
    now = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
    rows = [
        (
            chat["id"],
            "user" if i % 2 == 0 else "assistant",
            f"Message number {i}\n\n" + "Some text. " * 20,
            now,
        )
        for i in range(240)
    ]
    with sqlite3.connect(site.database_url.removeprefix("sqlite:///"), timeout=10) as db:
        db.executemany(
            "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, ?)", rows
        )
    return chat


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_scrolling_up_loads_one_older_page_and_keeps_the_reading_position(
    open_page, long_chat, size, scheme
):
    page = open_page(size, scheme)
    open_chat(page, long_chat["id"])
    messages = page.locator("#transcript article.msg")
    page.wait_for_function(
        "() => document.querySelectorAll('#transcript article.msg').length === 50"
    )
    first = page.locator("#transcript article.msg").first
    first_text = first.locator(".msg-body").inner_text().split("\n")[0]
    assert first_text == "Message number 190"
    # Scroll to the very top: one page arrives, and the message that was first stays put.
    first.evaluate("el => el.dataset.watch = '1'")
    page.evaluate("() => { document.querySelector('#transcript').scrollTop = 0; }")
    page.wait_for_function(
        "() => document.querySelectorAll('#transcript article.msg').length === 100"
    )
    page.wait_for_function("""() => { const t = document.querySelector('#transcript'),
        el = t.querySelector('[data-watch]');
        const r = el.getBoundingClientRect(), b = t.getBoundingClientRect();
        return r.top >= b.top - 2 && r.top <= b.top + 80; }""")
    assert messages.count() == 100  # one page, not all of them
    assert page.locator("#transcript .load-older").count() == 1
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_jump_to_latest_appears_when_scrolled_up_while_streaming(
    open_page, api, scripted, size, scheme
):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario()
        .text("\n\n".join(f"Paragraph {i} of a long answer." for i in range(120)), chunks=240)
        .delay(0.04),
        model=model,
    )
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    send(page, "Write a lot")
    page.locator(".turn-live .msg-body", has_text="Paragraph 40").wait_for()
    jump = page.get_by_role("button", name="Jump to the latest message")
    assert not jump.is_visible()
    page.evaluate("() => { document.querySelector('#transcript').scrollTop = 0; }")
    jump.wait_for()
    jump.click()
    page.wait_for_function("""() => { const t = document.querySelector('#transcript');
        return t.scrollHeight - t.scrollTop - t.clientHeight < 80; }""")
    assert not jump.is_visible()
    page.click("#stop-button")
    page.locator("#send-button").wait_for()
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_model_picker_does_not_open_settings(open_page, api, scripted, size, scheme):
    chat = make_chat(api, scripted, model=unique_model())
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    picker = page.locator("#header-model")
    options = picker.locator("option").evaluate_all("os => os.map(o => o.value)")
    other = next(v for v in options if v != picker.input_value())
    header = page.locator("#chat-header").element_handle()
    # The change posts the form, and the answer replaces the header. A wait for "networkidle"
    # returned at once (the page had been idle before), so the stored model was read while
    # the post was on its way, and once in CI before it arrived.
    with page.expect_response(lambda r: r.url.endswith(f"/c/{chat['id']}/settings")):
        picker.select_option(other)
    page.wait_for_function("old => !old.isConnected", arg=header)
    assert page.locator("#header-model").input_value() == other
    assert not page.locator(".chat-settings .settings-form").is_visible()
    assert api.get(f"/api/session/{chat['id']}")[1]["model"] == other.split(":", 1)[1]
    assert page.errors == []


# --- item 8: accessibility -------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_axe_finds_no_serious_problems_in_any_view(open_page, api, scripted, size, scheme):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text(
            "## A heading\n\nSome **bold** text, `code`, and a [link](https://example.org).\n\n"
            "```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- one\n- two"
        ),
        Scenario().text(" ".join(f"token{i}" for i in range(300)), chunks=300).delay(0.05),
        model=model,
    )
    page = open_page(size, scheme)
    found = {"home": serious_violations(page)}
    open_chat(page, chat["id"])
    send(page, "Show me some formatting")
    page.locator("article.msg-assistant .msg-body table").wait_for()
    page.locator("#send-button").wait_for()
    found["chat, finished"] = serious_violations(page)
    send(page, "Now a long one")
    page.locator(".turn-live .msg-body", has_text="token5").wait_for()
    found["chat, mid-stream"] = serious_violations(page)
    page.click("#stop-button")
    page.locator("#send-button").wait_for()
    if size == "phone":
        page.click("#menu-button")
        page.wait_for_function(
            "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
        )
        found["drawer"] = serious_violations(page)
        page.keyboard.press("Escape")
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.click(".chat-settings summary")
    found["chat settings"] = serious_violations(page)
    page.goto("/settings")
    found["settings"] = serious_violations(page)
    assert {view: problems for view, problems in found.items() if problems} == {}
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_screen_readers_hear_finished_answers_and_find_landmarks(
    open_page, api, scripted, size, scheme
):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text("First part. " * 5 + "The end.", chunks=30).delay(0.03), model=model
    )
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    assert page.get_by_role("main").count() == 1
    reveal_sidebar(page, size)
    assert page.get_by_role("navigation", name="Chats").count() == 1
    if size == "phone":
        page.keyboard.press("Escape")
    region = page.locator("#answer-announcer")
    assert region.get_attribute("aria-live") == "polite"
    send(page, "Talk to me")
    page.locator(".turn-live .msg-body", has_text="First part.").wait_for()
    assert region.inner_text() == ""  # nothing while tokens stream
    page.locator("#send-button").wait_for()
    page.wait_for_function(
        "() => document.querySelector('#answer-announcer').textContent.includes('The end.')"
    )
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_lost_connection_shows_reconnecting_until_it_is_back(
    open_page_on, live_server_factory, size, scheme
):
    server = live_server_factory(**turn_server_env())
    status, chat = Api(server.url, token=server.token).post("/api/session", {"title": "Flaky line"})
    assert status == 201
    page = open_page_on(server, size, scheme)
    open_chat(page, chat["id"])
    banner = page.get_by_role("status").filter(has_text="Reconnecting…")
    assert not banner.is_visible()
    server.stop()
    banner.wait_for()
    server.start()
    banner.wait_for(
        state="hidden", timeout=WAIT_SECONDS * 1000
    )  # the socket retries with a backoff
    assert page.locator("#connection").get_attribute("data-state") == "open"
    server.stop()
