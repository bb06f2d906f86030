"""Calm message chrome and a still composer (issue 25, items 5, 7 and 10; issue 43) in real
Chromium at 1280×800 and 390×844: message actions as icons shown on hover, focus or a tap,
the rest in a "…" menu,
no "Assistant" label, the metrics behind ⓘ, a long question collapsed with "Show more";
the edit form; a composer that does not move when a turn starts and ends; a phone header
on one row."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from import_support import api_imported_chat

from numi.testing import Scenario

from page_support import LOOKS, open_chat, open_signed_in_page, send, serious_violations
from turn_support import make_chat

pytestmark = pytest.mark.browser


def opacity(locator) -> str:
    return locator.evaluate("el => getComputedStyle(el).opacity")


def settles_at(page, locator, value: str) -> None:
    """Wait until `locator`'s opacity has faded to `value` (the icons fade in and out)."""
    page.wait_for_function(
        "([el, value]) => getComputedStyle(el).opacity === value",
        arg=[locator.element_handle(), value],
    )


def import_chat(api, messages: list[dict], title: str = "Imported") -> str:
    doc = {"format": "numi.chat", "version": 1, "chat": {"title": title}, "messages": messages}
    return api_imported_chat(api, doc)


# Every layout shift from now on, with the elements that moved (a PerformanceObserver of
# `layout-shift`, as the CLS metric counts them, but keeping those after an input too).
WATCH_SHIFTS = """() => {
    window.shifts = [];
    new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.shifts.push({value: e.value,
            recent: e.hadRecentInput, nodes: e.sources.map((s) => s.node ?
                (s.node.id || s.node.className || s.node.nodeName) + '' : '?')});
    }).observe({type: 'layout-shift'});
}"""


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_composer_holds_still_while_a_turn_starts_and_ends(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"still-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Earlier answer."), model=model)
    scripted.enqueue(
        Scenario().text(" ".join(f"w{i}" for i in range(40)), chunks=40).delay(0.02), model=model
    )
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send(page, "Warm up")  # the first answer, so the chat has a transcript and a gauge
    page.locator("#transcript .msg-assistant", has_text="Earlier answer.").wait_for()
    page.locator("#send-button").wait_for()
    page.locator("#context-gauge .gauge-button").wait_for()
    page.wait_for_load_state("networkidle")
    page.evaluate(WATCH_SHIFTS)
    send(page, "Count slowly")
    page.get_by_role("button", name="Stop the answer").wait_for()
    page.locator(".turn-live .msg-body", has_text="w3").wait_for()
    shot(page, f"turn-running-{size}-{scheme}")
    page.locator("#transcript .msg-assistant", has_text="w39").wait_for()
    page.locator("#send-button").wait_for()
    page.wait_for_load_state("networkidle")
    page.locator("#context-gauge .gauge-button").wait_for()
    shifts = page.evaluate("window.shifts")
    # Nothing moved: not the composer, not the gauge above it, not the earlier answer's icons.
    assert sum(s["value"] for s in shifts) == 0, shifts
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_stop_keeps_its_shape_beside_stop_and_clear_queue(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"shape-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text("Long answer.").stall(), Scenario().text("Queued answer."), model=model
    )
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send(page, "Go on")
    page.locator(".turn-live", has_text="Long answer.").wait_for()
    stop = page.get_by_role("button", name="Stop the answer")
    before = stop.bounding_box()
    send(page, "And then this")
    page.locator("#queue .queued", has_text="And then this").wait_for()
    clear = page.get_by_role("button", name="Stop and clear queue")
    clear.wait_for()
    after = stop.bounding_box()
    shot(page, f"stop-and-clear-{size}-{scheme}")
    assert (after["width"], after["height"]) == (before["width"], before["height"])
    assert after["width"] == after["height"], "Stop stays a circle"
    # Every control of the row stays inside the composer.
    row = page.locator("#composer .composer-box").bounding_box()
    for control in (stop, clear, page.get_by_role("button", name="Queue this message")):
        box = control.bounding_box()
        assert row["x"] <= box["x"] and box["x"] + box["width"] <= row["x"] + row["width"]
    scripted.release()
    page.locator("#transcript .msg-assistant", has_text="Queued answer.").wait_for()
    page.locator("#send-button").wait_for()
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_message_actions_are_icons_shown_on_hover_or_focus(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"calm-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text("The first answer.").usage(11, 8),
        Scenario().text("The second answer.").usage(20, 4),
        model=model,
    )
    page = open_page_on(site, size, scheme)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_chat(page, chat["id"])
    send(page, "First question")
    page.locator("#transcript .msg-assistant", has_text="The first answer.").wait_for()
    page.locator("#send-button").wait_for()
    send(page, "Second question")
    page.locator("#transcript .msg-assistant", has_text="The second answer.").wait_for()
    page.locator("#send-button").wait_for()
    page.mouse.move(0, 0)
    first, newest = page.locator("article.msg-assistant").all()
    question = page.locator("article.msg-user").first

    # No "Assistant" over each answer: the name is there for a screen reader only.
    for role in page.locator("#transcript .msg-role > span").all():
        box = role.bounding_box()
        assert box is None or (box["width"] <= 1 and box["height"] <= 1), role.inner_text()
    assert first.locator(".msg-role").text_content().strip() == "Assistant"
    # The newest answer shows its icons; older messages only under the pointer or the focus.
    newest_actions = newest.locator(".msg-actions")
    settles_at(page, first.locator(".msg-actions"), "0")
    settles_at(page, question.locator(".msg-actions"), "0")
    assert opacity(newest_actions) == "1"
    shot(page, f"actions-calm-{size}-{scheme}")
    first.locator(".msg-body").hover()
    settles_at(page, first.locator(".msg-actions"), "1")
    shot(page, f"actions-hover-{size}-{scheme}")
    page.mouse.move(0, 0)
    question.get_by_role("button", name="Copy message").focus()
    page.keyboard.press("Tab")  # the next icon, Edit, by the keyboard
    assert page.evaluate("document.activeElement.textContent.trim()") == "Edit"
    settles_at(page, question.locator(".msg-actions"), "1")
    # A question offers Copy and Edit; the rest of a message's actions wait in its "…" menu.
    assert question.locator(".msg-actions > button").all_inner_texts() == ["Copy", "Edit"]
    # Icons, with their names kept for a screen reader and as tooltips: four on the newest
    # answer (Copy, Read aloud, "…", Regenerate).
    for name in ("Copy message", "Read aloud", "Regenerate"):
        button = newest.get_by_role("button", name=name, exact=True)
        assert button.locator("svg").count() >= 1, name
        assert button.get_attribute("title"), name
    more = newest.locator(".msg-more > summary")
    assert more.is_visible() and more.get_attribute("title") == "More actions"
    # The rest in words, in the "…" menu (a sheet from the bottom on a phone).
    menu = newest.locator(".msg-menu")
    assert not menu.is_visible()
    more.click()
    menu.wait_for()
    for name in ("Fork", "Leave out of context", "Delete"):
        assert menu.get_by_role("button", name=name, exact=True).is_visible(), name
    box, room = menu.bounding_box(), page.locator("#transcript").bounding_box()
    if size == "desktop":  # in sight without scrolling: above the row when below has no room
        assert box["y"] + box["height"] <= room["y"] + room["height"] + 0.5
    shot(page, f"actions-menu-{size}-{scheme}")
    page.keyboard.press("Escape")  # closes it, focus back on "…"
    menu.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.title") == "More actions"

    # The metrics line is on demand: Info in the menu.
    answer_id = newest.get_attribute("data-message-id")
    metrics = page.locator(f"#msg-{answer_id}-metrics")
    assert not metrics.is_visible()
    more.click()
    newest.locator(".msg-menu summary", has_text="Info").click()
    metrics.wait_for()
    assert model in metrics.inner_text() and "4 out" in metrics.inner_text()
    shot(page, f"actions-details-{size}-{scheme}")
    page.keyboard.press("Escape")

    # Copy says "Copied" beside its icon, and copies the markdown.
    newest.get_by_role("button", name="Copy message").click()
    newest.locator(".copy-message", has_text="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == "The second answer."
    assert serious_violations(page) == []
    assert page.errors == []


def test_on_a_touch_screen_a_tap_shows_a_message_s_actions(open_page_on, site, api, shot):
    chat_id = import_chat(
        api,
        [
            {"role": "user", "content": "Q one"},
            {"role": "assistant", "content": "A one."},
            {"role": "user", "content": "Q two"},
            {"role": "assistant", "content": "A two."},
        ],
    )
    page = open_page_on(site, "phone", "light", f"/c/{chat_id}", touch=True)
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    *older, newest = page.locator("#transcript .msg-actions").all()
    assert opacity(newest) == "1"  # the newest answer's, always
    for actions in older:
        assert opacity(actions) == "0"  # the transcript reads as text, not rows of icons
    shot(page, "actions-calm-touch-phone-light")
    question = page.locator("article.msg-user").first
    question.locator(".msg-body").tap()  # no hover on a touch screen: a tap shows them
    settles_at(page, question.locator(".msg-actions"), "1")
    edit = question.get_by_role("button", name="Edit")
    box = edit.bounding_box()
    assert box["width"] >= 40 and box["height"] >= 40  # a finger's target
    shot(page, "actions-touch-phone-light")


LONG = "\n".join(f"Line {n}: some pasted log output that goes on for a while." for n in range(40))


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_long_question_collapses_with_show_more_and_show_less(
    open_page_on, site, api, shot, size, scheme
):
    chat_id = import_chat(
        api,
        [
            {"role": "user", "content": LONG},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "A short one"},
        ],
    )
    page = open_page_on(site, size, scheme, f"/c/{chat_id}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    long_text = page.locator(".user-text", has_text="Line 0:")
    full = long_text.evaluate("el => el.scrollHeight")
    assert long_text.evaluate("el => el.clientHeight") < full / 2  # its first lines only
    assert page.locator(".msg-user", has_text="A short one").locator(".show-more").count() == 0
    more = page.locator(".show-more summary")
    assert more.inner_text() == "Show more"
    long_text.scroll_into_view_if_needed()
    shot(page, f"show-more-{size}-{scheme}")
    more.click()
    page.wait_for_function(
        "el => el.clientHeight >= el.scrollHeight", arg=long_text.element_handle()
    )
    assert more.inner_text() == "Show less"
    shot(page, f"show-less-{size}-{scheme}")
    more.click()
    page.wait_for_function(
        "el => el.clientHeight < el.scrollHeight", arg=long_text.element_handle()
    )
    assert more.inner_text() == "Show more"
    assert serious_violations(page) == []
    assert page.errors == []


def test_show_more_needs_no_script(browser, site, api):
    chat_id = import_chat(api, [{"role": "user", "content": LONG}])
    signed_in = open_signed_in_page(browser, site, "desktop", "light", "/")
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 800}
    )
    try:
        context.add_cookies(signed_in.context.cookies())
        page = context.new_page()
        page.goto(f"{site.url}/c/{chat_id}")
        long_text = page.locator(".user-text", has_text="Line 0:")
        assert long_text.evaluate("el => el.clientHeight < el.scrollHeight")
        page.locator(".show-more summary").click()
        assert long_text.evaluate("el => el.clientHeight >= el.scrollHeight")
        assert page.locator(".show-more summary").inner_text() == "Show less"
    finally:
        context.close()
        signed_in.context.close()


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_question_is_edited_in_place_and_sent_as_a_new_version(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"edit-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Paris."), Scenario().text("Madrid."), model=model)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    page.set_input_files(
        "#composer-file",
        files=[{"name": "france.txt", "mimeType": "text/plain", "buffer": b"France."}],
    )
    page.locator("#composer .attachment-chip[data-attachment-id]").wait_for()
    send(page, "Capital of France?")
    page.locator("#transcript .msg-assistant", has_text="Paris.").wait_for()
    page.locator("#send-button").wait_for()
    question = page.locator("article.msg-user").first
    question_id = question.get_attribute("data-message-id")
    where = question.bounding_box()
    question.get_by_role("button", name="Edit").click()
    form = page.locator(f"form#msg-{question_id}")
    box = form.get_by_role("textbox", name="Edit your message")
    box.wait_for()
    # The editor stands where the question stood, above its answer, the text in a box that
    # has the focus, as wide as the column.
    expect(box).to_be_focused()  # focused by the swap's script, just after it shows
    assert box.input_value() == "Capital of France?"
    editor = form.bounding_box()
    answer = page.locator("#transcript .msg-assistant", has_text="Paris.").bounding_box()
    assert abs(editor["y"] - where["y"]) < 2 and editor["y"] + editor["height"] <= answer["y"]
    assert editor["width"] >= where["width"]
    # Cancel restores the question as it was, and nothing was sent.
    box.fill("Something else entirely")
    form.get_by_role("button", name="Cancel").click()
    page.locator(f"article#msg-{question_id}", has_text="Capital of France?").wait_for()
    assert "Something else" not in page.locator("#transcript").inner_text()
    assert page.locator("article.msg-user").count() == 1
    # Again, with a file added and the first one kept, then sent.
    question.get_by_role("button", name="Edit").click()
    box.wait_for()
    # What sending does, truly: a new version, the old question and answer kept.
    note = form.locator(".edit-note").inner_text()
    assert "new version" in note and "stay" in note and "removes" not in note
    # The question's file, by name, kept unless unticked; no raw "Choose Files" input.
    assert form.get_by_role("checkbox", name="france.txt").is_checked()
    assert form.locator("input[type=file]").is_hidden()
    with page.expect_file_chooser() as chooser:
        form.get_by_role("button", name="Attach files").click()
    chooser.value.set_files(
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"Spain."}]
    )
    form.locator(".attachment-chip[data-attachment-id]").wait_for()
    box.fill("Capital of Spain?")
    shot(page, f"edit-form-{size}-{scheme}", both_themes=True)
    assert serious_violations(page, "#transcript") == []
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')"
    )
    form.get_by_role("button", name="Send").click()
    page.locator("#transcript .msg-assistant", has_text="Madrid.").wait_for()
    page.locator("#send-button").wait_for()
    sent = page.locator("article.msg-user").first
    assert "Capital of Spain?" in sent.inner_text()
    names = sent.locator(".attachment-name").all_inner_texts()
    assert sorted(names) == ["france.txt", "notes.txt"]
    # The old branch stays, one ‹ away.
    page.locator("article.msg-user .version-count", has_text="2/2").wait_for()
    page.locator("article.msg-user").get_by_role("button", name="Previous version").click()
    page.locator("#transcript .msg-assistant", has_text="Paris.").wait_for()
    assert "Capital of France?" in page.locator("#transcript").inner_text()
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_chat_header_fits_one_row(open_page_on, site, api, scripted, shot, size, scheme):
    chat = make_chat(api, scripted, model=f"header-{uuid.uuid4().hex[:8]}")
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    header = page.locator("#chat-header")
    # ☰ (a phone), the model with its chevron at the left, the title (a desktop), Share, "…".
    picker = page.locator("#header-model + .picker-button")  # the picker (its select is hidden)
    parts = [
        page.get_by_role("button", name="Open the chat list") if size == "phone" else None,
        picker,
        page.locator("#chat-title") if size == "desktop" else None,
        page.locator(".chat-share > summary"),
        page.locator("#chat-more > summary"),
    ]
    boxes = [p.bounding_box() for p in parts if p is not None]
    middles = [b["y"] + b["height"] / 2 for b in boxes]
    assert max(middles) - min(middles) < 4, boxes  # one row
    assert [b["x"] for b in boxes] == sorted(b["x"] for b in boxes), "in this order"
    assert header.bounding_box()["height"] < 60
    right = header.bounding_box()["x"] + header.bounding_box()["width"]
    assert all(b["x"] + b["width"] <= right for b in boxes), "nothing cut off"
    assert picker.evaluate("el => getComputedStyle(el).borderTopWidth") == "0px"  # borderless
    # Project, Export, Temporary and Settings wait in the "…" menu, in words.
    page.locator("#chat-more > summary").click()
    menu = page.locator("#chat-more .chat-menu")
    for name in ("Project", "Export", "New temporary chat", "Settings"):
        assert menu.get_by_text(name, exact=True).is_visible(), name
    shot(page, f"header-menu-{size}-{scheme}", both_themes=True)
    page.locator(".chat-settings > summary").click()
    page.locator(".chat-settings .settings-form").wait_for()
    page.keyboard.press("Escape")  # closes Settings, the "…" stays open
    page.locator(".chat-settings .settings-form").wait_for(state="hidden")
    assert menu.is_visible()
    page.keyboard.press("Escape")
    menu.wait_for(state="hidden")
    shot(header, f"header-{size}-{scheme}")
    assert serious_violations(page) == []
    assert page.errors == []
