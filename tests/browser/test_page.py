"""The chat page as a person uses it, in real headless Chromium at 1280×800 and 390×844, light
and dark: the mobile drawer and sheets, the sidebar (infinite scroll to the 500th chat, date
groups, "answering" marks, no empty chats left behind), the composer (refused sends keep
the text, drafts, autogrow, the Attach button), keyboard shortcuts and focus, titles, paging
up a long chat, jump to latest, and an axe-core check of every view.

One live server for the module, one browser; each test opens its own context (viewport and
colour scheme) so tests never share cookies or storage they did not ask for.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from numi.testing import Scenario

from page_support import LOOKS, SIZES, open_chat, send, serious_violations
from turn_support import Api, Socket, db_rows, make_chat, turn_server_env

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


@pytest.fixture
def api(site):
    return Api(site.url, token=site.token)


@pytest.fixture
def open_page(open_page_on, site):
    """`open_page(size, scheme)`: `open_page_on` the module's server."""
    return lambda size, scheme, path="/": open_page_on(site, size, scheme, path)


def unique_model() -> str:
    return f"page-{uuid.uuid4().hex[:8]}"


def reveal_sidebar(page, size: str) -> None:
    if size == "phone":
        page.click("#menu-button")
        page.wait_for_function(
            "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
        )


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")


def in_viewport(page, selector: str) -> bool:
    return page.evaluate(
        """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.width > 0 && r.left >= 0 && r.top >= 0
          && r.right <= innerWidth + 0.5 && r.bottom <= innerHeight + 0.5; }""",
        selector,
    )


def focused_inside(page, selector: str) -> bool:
    return page.evaluate(
        "(sel) => !!document.activeElement && !!document.activeElement.closest(sel)", selector
    )


# --- item 3: mobile --------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_drawer_traps_focus_and_closes_back_to_the_menu_button(
    open_page, api, scripted, scheme
):
    chat = make_chat(api, scripted, model=unique_model())
    page = open_page("phone", scheme)
    open_chat(page, chat["id"])
    menu = page.get_by_role("button", name="Open the chat list")
    assert menu.is_visible() and menu.get_attribute("aria-expanded") == "false"
    assert not in_viewport(page, "#sidebar")

    menu.click()
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
    )
    assert menu.get_attribute("aria-expanded") == "true"
    assert focused_inside(page, "#sidebar")
    for _ in range(25):  # Tab and Shift+Tab never leave the drawer
        page.keyboard.press("Tab")
        assert focused_inside(page, "#sidebar")
    for _ in range(5):
        page.keyboard.press("Shift+Tab")
        assert focused_inside(page, "#sidebar")
    # New chat, search and Settings are all reachable from a phone.
    assert page.locator("#sidebar").get_by_role("button", name="New chat", exact=True).is_visible()
    assert page.locator("#sidebar").get_by_role("link", name="Settings").is_visible()
    assert page.get_by_role("searchbox", name="Search chats").is_visible()

    page.keyboard.press("Escape")
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().right <= 0"
    )
    assert menu.get_attribute("aria-expanded") == "false"
    assert page.evaluate("() => document.activeElement.id") == "menu-button"

    # An outside tap closes it too.
    menu.click()
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
    )
    page.mouse.click(375, 400)
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().right <= 0"
    )
    assert page.evaluate("() => document.activeElement.id") == "menu-button"
    assert no_horizontal_overflow(page)
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_chat_settings_open_on_screen_and_the_composer_is_usable(
    open_page, api, scripted, size, scheme
):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Answer from the phone."), model=model)
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    page.click(".chat-settings summary")
    form = page.locator(".chat-settings .settings-form")
    form.wait_for()
    box = form.bounding_box()
    viewport = SIZES[size]
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] + 0.5
    if size == "phone":  # a full-width sheet
        assert box["width"] == pytest.approx(viewport["width"], abs=1)
    page.get_by_label("System prompt").fill("Be brief.")
    form.get_by_role("button", name="Save").click()
    page.locator(".chat-settings .saved").wait_for()
    page.keyboard.press("Escape")
    assert not page.locator(".chat-settings .settings-form").is_visible()

    assert in_viewport(page, "#composer-input") and in_viewport(page, "#send-button")
    send(page, "Hello from a small screen")
    page.locator("article.msg-assistant .msg-body", has_text="Answer from the phone.").wait_for()
    assert no_horizontal_overflow(page)
    assert page.errors == []


# --- item 4: the sidebar ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_chats(site):
    """520 chats, one every two hours back from now: every date group, 11 keyset pages."""
    Api(site.url, token=site.token).get("/api/sessions")  # the local user exists
    user_id = db_rows(site, "SELECT id FROM users ORDER BY id LIMIT 1")[0][0]
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = []
    for i in range(520):
        stamp = (now - timedelta(hours=2 * i + 1)).isoformat(sep=" ")
        rows.append((str(uuid.uuid4()), user_id, f"Old chat {i + 1:03d}", stamp, stamp))
    with sqlite3.connect(site.database_url.removeprefix("sqlite:///"), timeout=10) as db:
        db.executemany(
            "INSERT INTO chats (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
    return {title: chat_id for chat_id, _, title, _, _ in rows}


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_sidebar_scrolls_to_the_500th_chat_with_date_groups(open_page, many_chats, size, scheme):
    page = open_page(size, scheme)
    page.goto(f"/c/{many_chats['Old chat 120']}")
    reveal_sidebar(page, size)
    # The current chat, though beyond the first page, is in the list and scrolled into view.
    current = page.locator("#chat-list .chat-item.current")
    assert current.inner_text().startswith("Old chat 120")
    assert page.evaluate("""() => { const l = document.querySelector('#chat-list').getBoundingClientRect(),
        c = document.querySelector('#chat-list .current').getBoundingClientRect();
        return c.top >= l.top && c.bottom <= l.bottom; }""")

    target = page.locator("#chat-list .chat-link", has_text="Old chat 500")
    for _ in range(30):
        if target.count():
            break
        count = page.locator("#chat-list .chat-item").count()
        page.evaluate(
            "() => { const l = document.querySelector('#chat-list'); l.scrollTop = l.scrollHeight; }"
        )
        page.wait_for_function(
            f"() => document.querySelectorAll('#chat-list .chat-item').length > {count} "
            "|| !document.querySelector('#chat-list .load-more')"
        )
    target.scroll_into_view_if_needed()
    assert target.is_visible()

    headers = page.locator("#chat-list .chat-group-title").all_inner_texts()
    assert len(headers) == len(set(headers)), headers  # no group repeated across pages
    assert headers[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"], headers
    assert len(headers) >= 5 and all(h.split()[-1].isdigit() for h in headers[4:]), (
        headers
    )  # then months
    # Every chat appears once, in order.
    titles = [
        t
        for t in page.locator("#chat-list .chat-link-title").all_inner_texts()
        if t.startswith("Old chat")
    ]
    assert titles == sorted(titles) and len(titles) == len(set(titles)) and len(titles) >= 500
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_answering_mark_follows_a_turn_in_another_chat(
    open_page, api, scripted, site, size, scheme
):
    model = unique_model()
    busy = make_chat(api, scripted, model=model)
    other = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{busy['id']}", {"title": f"Busy {model}"})
    scripted.enqueue(Scenario().text("Thinking slowly").stall(), model=model)
    page = open_page(size, scheme)
    open_chat(page, other["id"])
    reveal_sidebar(page, size)
    mark = page.locator(f"#chat-{busy['id']} .answering-mark")
    assert not mark.is_visible()

    sock = Socket(site, busy["id"])
    try:
        sock.send(type="send", message="Take your time", request_id=uuid.uuid4().hex)
        mark.wait_for(state="visible")  # without a reload
        sock.send(type="stop")
        sock.events_until("turn_end")
    finally:
        scripted.release()
        sock.close()
    mark.wait_for(state="hidden")
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_new_chat_twice_leaves_one_empty_chat(open_page, size, scheme):
    page = open_page(size, scheme)
    empty_before = page.locator("#chat-list .chat-link-title", has_text="New chat").count()
    reveal_sidebar(page, size)
    page.locator("#sidebar").get_by_role("button", name="New chat", exact=True).click()
    page.wait_for_url("**/c/*")
    first = page.url
    reveal_sidebar(page, size)
    page.locator("#sidebar").get_by_role("button", name="New chat", exact=True).click()
    page.wait_for_load_state()
    assert page.url == first  # the empty chat again, not one more
    assert page.locator("#chat-list .chat-link-title", has_text="New chat").count() == max(
        empty_before, 1
    )
    assert page.errors == []


# --- item 5: the composer --------------------------------------------------------------------

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000100000001008020000009091683600000017494441547801"
    "63fccfc0c0c0c4c0c0c0c0c0c0c0301a2a1a2a00a8b20b1d9d8f8a4b0000000049454e44ae426082"
)


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_refused_send_keeps_text_and_attachments(open_page, api, scripted, size, scheme):
    chat = make_chat(api, scripted, model=unique_model())  # a model that cannot see images
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    # An Attach button, not the browser's "Choose Files" input.
    assert not page.locator("input[type=file]").first.is_visible()
    attach = page.get_by_role("button", name="Attach files")
    assert attach.is_visible()
    with page.expect_file_chooser() as chooser:
        attach.focus()
        page.keyboard.press("Enter")
    chooser.value.set_files(files=[{"name": "cat.png", "mimeType": "image/png", "buffer": PNG}])
    chip = page.locator("#composer-attachments .attachment-chip[data-attachment-id]")
    chip.wait_for()
    assert chip.locator("img.chip-thumb").evaluate("img => img.complete && img.naturalWidth > 0")

    send(page, "What is in this picture?")
    error = page.locator("#composer-feedback[role=alert]")
    error.wait_for()
    assert "cannot see images" in error.inner_text()
    assert page.input_value("#composer-input") == "What is in this picture?"
    assert chip.count() == 1
    assert page.locator("text=There is no question to answer again").count() == 0
    assert page.locator("#transcript .turn-error button", has_text="Retry").count() == 0

    # Remove the image and send again: accepted, so the composer empties.
    chip.locator(".attachment-remove").click()
    page.click("#send-button")
    page.locator("#transcript .msg-user", has_text="What is in this picture?").wait_for()
    page.wait_for_function("() => document.querySelector('#composer-input').value === ''")
    assert page.locator("#composer-feedback[role=alert]").count() == 0
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_drafts_survive_reload_and_navigation_and_clear_on_send(
    open_page, api, scripted, size, scheme
):
    model = unique_model()
    chat = make_chat(api, scripted, model=model)
    other = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Got your draft."), model=model)
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    page.set_input_files(
        "#composer-file",
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}],
    )
    page.locator("#composer-attachments .attachment-chip[data-attachment-id]").wait_for()
    page.fill("#composer-input", "A draft\nover two lines")
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.input_value("#composer-input") == "A draft\nover two lines"
    assert page.locator("#composer-attachments .attachment-name").inner_text() == "notes.txt"
    open_chat(page, other["id"])
    assert page.input_value("#composer-input") == ""  # drafts are per chat
    open_chat(page, chat["id"])
    assert page.input_value("#composer-input") == "A draft\nover two lines"

    page.press("#composer-input", "Enter")
    page.locator("article.msg-assistant .msg-body", has_text="Got your draft.").wait_for()
    assert page.input_value("#composer-input") == ""
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.input_value("#composer-input") == ""
    assert page.locator("#composer-attachments .attachment-chip").count() == 0
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_composer_grows_up_to_forty_percent_of_the_screen(
    open_page, api, scripted, size, scheme
):
    chat = make_chat(api, scripted, model=unique_model())
    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    field = page.locator("#composer-input")
    one_line = field.bounding_box()["height"]
    field.fill("line\n" * 4)
    four_lines = field.bounding_box()["height"]
    assert four_lines > one_line * 2
    field.fill("line\n" * 200)
    tall = field.bounding_box()["height"]
    assert tall <= SIZES[size]["height"] * 0.4 + 2
    assert tall > SIZES[size]["height"] * 0.3
    assert in_viewport(page, "#send-button")
    assert page.errors == []


# --- item 7: keyboard ------------------------------------------------------------------------


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
    page.focus(".chat-export summary")
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    dialog.wait_for()
    assert "Ctrl/⌘ + K" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Export"

    # Export menu: Esc closes it and focus returns to its button; an outside click closes it.
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
    page.keyboard.press("Escape")
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
def test_deleting_the_open_chat_opens_the_next_one(open_page, api, scripted, size, scheme):
    model = unique_model()
    older = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{older['id']}", {"title": f"Keep {model}"})
    doomed = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{doomed['id']}", {"title": f"Doomed {model}"})
    page = open_page(size, scheme)
    open_chat(page, doomed["id"])
    reveal_sidebar(page, size)
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator(f"#chat-{doomed['id']}").get_by_role("button", name="Delete").click()
    page.wait_for_url(lambda url: doomed["id"] not in url and "/c/" in url)
    page.reload()
    assert page.locator("#chat-title").is_visible()  # a live chat, not a 404
    assert page.locator(f"#chat-{doomed['id']}").count() == 0
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
    picker.select_option(other)
    page.wait_for_function(f"() => document.querySelector('#header-model').value === {other!r}")
    page.wait_for_load_state("networkidle")
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
    banner.wait_for(state="hidden", timeout=30_000)  # the socket retries with a backoff
    assert page.locator("#connection").get_attribute("data-state") == "open"
    server.stop()
