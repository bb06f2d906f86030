"""The chat page as a person uses it, in real headless Chromium at 1280×800 and 390×844, light
and dark: the mobile drawer and sheets, the sidebar (infinite scroll to the 500th chat, date
groups, "answering" marks, no empty chats left behind), the composer (refused sends keep
the text, drafts, autogrow, the Attach button). The rest of the page is in
test_page_reading.py.

One live server for the module, one browser; each test opens its own context (viewport and
colour scheme) so tests never share cookies or storage they did not ask for.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from numi.testing import Scenario

from page_support import (
    LOOKS,
    SIZES,
    focused_inside,
    in_viewport,
    no_horizontal_overflow,
    open_chat,
    reveal_sidebar,
    send,
    unique_model,
)
from turn_support import Api, Socket, db_rows, make_chat

pytestmark = pytest.mark.browser


# --- item 3: mobile --------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_drawer_traps_focus_and_closes_back_to_the_menu_button(
    open_page, api, scripted, scheme, shot
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
    # Search is an icon that opens the box, focused; Esc closes it back to the icon.
    search = page.get_by_role("searchbox", name="Search chats")
    assert not search.is_visible()
    page.locator("#search-toggle > summary").click()
    page.wait_for_function("() => document.activeElement.id === 'chat-search'")
    assert search.is_visible()
    shot(page, f"drawer-search-{scheme}")
    page.keyboard.press("Escape")
    assert not search.is_visible()
    assert page.evaluate("() => document.activeElement.closest('#search-toggle') !== null")

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
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.click(".chat-settings summary")
    form = page.locator(".chat-settings .settings-form")
    form.wait_for()
    box = page.locator("#chat-more .chat-menu").bounding_box()
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
    """520 chats, one every two hours back from now, the newest now (an hour ago is
    yesterday between midnight and one): every date group, 11 keyset pages."""
    Api(site.url, token=site.token).get("/api/sessions")  # the local user exists
    user_id = db_rows(site, "SELECT id FROM users ORDER BY id LIMIT 1")[0][0]
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = []
    for i in range(520):
        stamp = (now - timedelta(hours=2 * i)).isoformat(sep=" ")
        rows.append((str(uuid.uuid4()), user_id, f"Old chat {i + 1:03d}", stamp, stamp))
    with sqlite3.connect(site.database_url.removeprefix("sqlite:///"), timeout=10) as db:
        db.executemany(
            "INSERT INTO chats (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
    return {title: chat_id for chat_id, _, title, _, _ in rows}


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_sidebar_scrolls_to_the_500th_chat_with_date_groups(
    open_page, many_chats, size, scheme, shot
):
    page = open_page(size, scheme)
    page.goto(f"/c/{many_chats['Old chat 120']}")
    reveal_sidebar(page, size)
    # The current chat, though beyond the first page, is in the list and scrolled into view.
    current = page.locator("#chat-list .chat-item.current")
    assert current.inner_text().startswith("Old chat 120")
    assert page.evaluate("""() => { const l = document.querySelector('#chat-list').getBoundingClientRect(),
        c = document.querySelector('#chat-list .current').getBoundingClientRect();
        return c.top >= l.top && c.bottom <= l.bottom; }""")

    # Only its neighbourhood is drawn with it: the chats between the first page and it
    # load when the list is scrolled up there, the older ones when scrolled down.
    assert page.locator("#chat-list .chat-item").count() < 100
    shot(page, f"sidebar-around-{size}")
    target = page.locator("#chat-list .chat-link", has_text="Old chat 500")
    for _ in range(30):
        loaders = page.locator("#chat-list .load-more")
        if not loaders.count():
            break
        count = page.locator("#chat-list .chat-item").count()
        loaders.first.scroll_into_view_if_needed()
        page.wait_for_function(
            f"() => document.querySelectorAll('#chat-list .chat-item').length > {count}"
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
    assert titles == sorted(titles) and len(titles) == len(set(titles)) == 520
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
    # An Attach button in the "+" menu, not the browser's "Choose Files" input.
    assert not page.locator("input[type=file]").first.is_visible()
    page.get_by_title("Attach files, tools, Compare").click()
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
