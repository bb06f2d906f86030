"""Organising chats, the theme and background answers in real headless Chromium, at
1280×800 and 390×844: pin and unpin, archive and restore through the Archived view, the tag
filter, multi-select with Undo, the theme applied from the first paint, and a desktop
notification (the browser's Notification API, recorded by an init script) when an answer
finishes in a chat that is not in view, with its unread mark cleared once opened."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario

from page_support import (
    LOOKS_ON_BACKENDS,
    SIZES_ON_BACKENDS,
    reveal_sidebar,
    serious_violations,
)
from turn_support import Socket, make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

# Records what the page asks of the browser's Notification API (permission is granted to
# the context); nothing of ours is replaced.
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  window.__notes = [];
  function Recorded(title, options) {
    window.__notes.push({title, body: options && options.body}); this.close = () => {};
  }
  Object.defineProperty(Recorded, "permission", {get: () => Real.permission});
  Recorded.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Recorded;
})();
"""


@pytest.fixture(scope="module")
def site_env(module_database_url):
    """One server per backend: desktop on SQLite, phone on PostgreSQL (below)."""
    return {"NUMI_DATABASE_URL": module_database_url}


@pytest.fixture
def open_page(open_page_on, site, request):
    """`open_page(size, scheme, path="/", notifications=False)`: a signed-in page of the
    module's server that accepts confirm() prompts; with `notifications`, in the full
    Chromium (the headless shell has no Notification permission to grant), permission is
    granted and the page's Notification calls are recorded on `window.__notes`."""

    def record_notifications(context):
        context.grant_permissions(["notifications"], origin=site.url)
        context.add_init_script(RECORD_NOTIFICATIONS)

    def opener(
        size: str, scheme: str, path: str = "/", notifications: bool = False, touch: bool = False
    ):
        page = open_page_on(
            site,
            size,
            scheme,
            path,
            in_browser=request.getfixturevalue("full_browser") if notifications else None,
            timeout=WAIT_SECONDS * 1000,
            prepare=record_notifications if notifications else None,
            touch=touch,
        )
        page.on("dialog", lambda d: d.accept())
        return page

    return opener


def open_row_menu(page, chat_id: str):
    """Open a chat's "…" (shown on hover on a desktop; on a phone always, and tapped): its
    items come from the server when it first opens."""
    item = page.locator(f"#chat-{chat_id}")
    item.hover()
    item.locator(".row-menu-button").click()
    menu = item.locator(".row-menu .menu-items")
    menu.locator(".menu-item").first.wait_for()
    return menu


def chat_action(page, chat_id: str, label: str) -> None:
    """Choose one of a chat's actions, in words, from its "…" menu."""
    open_row_menu(page, chat_id).locator(".menu-item", has_text=label).first.click()


def titles(page) -> list[str]:
    return page.locator("#chat-list .chat-link-title").all_inner_texts()


def new_titled_chat(api, title: str) -> str:
    status, chat = api.post("/api/session", {"title": title})
    assert status == 201
    return chat["id"]


# Each size on one backend, each backend at one size (page_support.on_one_backend_each): pins,
# archives, tags, bulk actions and themes are stored by the API, whose tests run on both
# backends (tests/web/test_organising.py, and tests/projects/ for moves to a project).
@LOOKS_ON_BACKENDS
def test_pin_archive_restore_and_tag_filter(open_page, api, size, scheme, shot):
    mark = uuid.uuid4().hex[:6]
    first = new_titled_chat(api, f"Recipes {mark}")
    second = new_titled_chat(api, f"Taxes {mark}")
    third = new_titled_chat(api, f"Trip {mark}")
    api.call("PATCH", f"/api/session/{second}", {"tags": [f"money-{mark}"]})
    page = open_page(size, scheme)
    reveal_sidebar(page, size)

    chat_action(page, first, "Pin")
    pinned = page.locator("#chat-list .chat-item.pinned")
    pinned.first.wait_for()
    assert page.locator("#chat-list .chat-group-title").first.inner_text() == "Pinned"
    assert pinned.first.inner_text().startswith(f"Recipes {mark}")
    shot(page, f"pinned-{size}-{scheme}")

    chat_action(page, third, "Archive")
    page.locator(f"#chat-{third}").wait_for(state="detached")
    assert page.get_by_role("status").filter(has_text="1 chat archived.").is_visible()

    # The tag filter shows only the tagged chat.
    page.reload()
    reveal_sidebar(page, size)
    page.click("#search-toggle > summary")  # the filters are in the search, behind its icon
    page.select_option(".tag-filter", f"money-{mark}")
    page.wait_for_function(f"() => !document.querySelector('#chat-{first}')")
    assert [t for t in titles(page) if mark in t] == [f"Taxes {mark}"]
    assert page.locator(f"#chat-{second} .chat-tag").inner_text() == f"money-{mark}"
    shot(page, f"tag-filter-{size}-{scheme}")

    # The Archived view lists the archived chat; Restore brings it back to the sidebar.
    page.goto("/archived")
    row = page.locator(f"#archived-{third}")
    assert row.is_visible() and f"Recipes {mark}" not in page.locator("#archived-list").inner_text()
    shot(page, f"archived-{size}-{scheme}")
    row.get_by_role("button", name=f"Restore “Trip {mark}”").click()
    row.wait_for(state="detached")
    page.goto("/")
    reveal_sidebar(page, size)
    assert f"Trip {mark}" in titles(page)

    chat_action(page, first, "Unpin")
    page.wait_for_function(f"() => !document.querySelector('#chat-{first}.pinned')")
    assert page.locator("#chat-list .chat-item.pinned").count() == 0
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_multi_select_archive_and_delete_with_undo(open_page, api, size, scheme, shot):
    mark = uuid.uuid4().hex[:6]
    ids = [new_titled_chat(api, f"Bulk {i} {mark}") for i in range(3)]
    page = open_page(size, scheme)
    reveal_sidebar(page, size)
    assert not page.locator(f"#chat-{ids[0]} .chat-select").is_visible()
    assert not page.get_by_role("button", name="Archive", exact=True).is_visible()
    # Selection mode comes from a row's "…", with that row chosen.
    chat_action(page, ids[0], "Select chats")
    expect(page.get_by_label(f"Select “Bulk 0 {mark}”")).to_be_checked()
    page.get_by_label(f"Select “Bulk 1 {mark}”").check()
    shot(page, f"select-{size}-{scheme}")
    page.get_by_role("button", name="Archive", exact=True).click()
    for chat_id in ids[:2]:
        page.locator(f"#chat-{chat_id}").wait_for(state="detached")
    toast = page.locator(".toast-undo").filter(has_text="2 chats archived.")
    assert toast.is_visible()
    shot(page, f"undo-{size}-{scheme}")
    toast.get_by_role("button", name="Undo").click()
    for chat_id in ids[:2]:
        page.locator(f"#chat-{chat_id}").wait_for()
    toast.wait_for(state="detached")
    assert api.get("/api/sessions?view=archived")[1]["sessions"] == []

    reveal_sidebar(page, size)
    chat_action(page, ids[2], "Select chats")
    expect(page.get_by_label(f"Select “Bulk 2 {mark}”")).to_be_checked()
    page.get_by_role("button", name="Delete", exact=True).click()
    page.locator(f"#chat-{ids[2]}").wait_for(state="detached")
    assert api.get(f"/api/session/{ids[2]}")[0] == 404
    page.locator(".toast-undo").filter(has_text="1 chat deleted.").get_by_role(
        "button", name="Undo"
    ).click()
    page.locator(f"#chat-{ids[2]}").wait_for()
    assert api.get(f"/api/session/{ids[2]}")[0] == 200
    assert page.errors == []


@SIZES_ON_BACKENDS
@pytest.mark.parametrize(
    "system,chosen,expected",
    [
        ("light", "dark", "rgb(33, 33, 33)"),
        ("dark", "light", "rgb(255, 255, 255)"),
        ("dark", "system", "rgb(33, 33, 33)"),
    ],
)
def test_theme_applies_from_the_first_paint(open_page, site, size, system, chosen, expected, shot):
    page = open_page(size, system, "/settings/appearance")
    choose_theme(page, chosen)
    # The click applied it (no reload, no Save button) ...
    expect(page.locator("body")).to_have_css("background-color", expected)
    # ... and the served HTML carries it (no script decides it) ...
    response = page.goto("/")
    assert f'<html lang="en" data-theme="{chosen}">' in response.text()
    # ... and the first frame already has its colours: record the background on the first
    # animation frame of a fresh navigation.
    page.add_init_script(
        "requestAnimationFrame(() => { window.__firstBg = getComputedStyle(document.body).backgroundColor; })"
    )
    page.goto("/")
    page.wait_for_function("() => window.__firstBg !== undefined")
    assert page.evaluate("window.__firstBg") == expected
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == expected
    shot(page, f"theme-{chosen}-on-{system}-{size}")
    page.goto("/settings/appearance")
    choose_theme(page, "system")  # leave the module's user as it was
    assert page.errors == []


THEME_LABELS = {"dark": "Dark", "light": "Light", "system": "Same as the system"}


def choose_theme(page, theme: str) -> None:
    """Settings → Appearance as a person uses it: a click on a theme applies it, and the
    page saves it in the background (waited for here, so the next page load has it)."""
    radio = page.get_by_label(THEME_LABELS[theme])
    if radio.is_checked():  # already the user's theme: a click changes nothing
        radio.check()
        assert page.evaluate("document.documentElement.dataset.theme") == theme
        return
    with page.expect_response(
        lambda r: r.url.endswith("/settings/appearance") and r.request.method == "POST"
    ) as saved:
        radio.check()
    assert saved.value.status == 204
    assert page.evaluate("document.documentElement.dataset.theme") == theme


@LOOKS_ON_BACKENDS
def test_a_background_answer_notifies_and_stays_unread_until_opened(
    open_page, api, scripted, site, size, scheme, shot
):
    model = f"org-{uuid.uuid4().hex[:8]}"
    busy = make_chat(api, scripted, model=model)
    shown = make_chat(api, scripted, model=model)
    api.call("PATCH", f"/api/session/{busy['id']}", {"title": f"Background {model}"})
    scripted.enqueue(Scenario().text("Working on it").stall().text(" — done."), model=model)

    page = open_page(size, scheme, "/settings/appearance", notifications=True)
    toggle = page.get_by_label(
        "Desktop notification when an answer finishes in a chat or tab I am not looking at"
    )
    toggle.check()
    page.get_by_text("Notifications are on in this browser.").wait_for()
    page.goto(f"/c/{shown['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    reveal_sidebar(page, size)
    answering = page.locator(f"#chat-{busy['id']} .answering-mark")

    sock = Socket(site, busy["id"])
    try:
        sock.send(type="send", message="Take your time", request_id=uuid.uuid4().hex)
        answering.wait_for(state="visible")
        scripted.release()
        sock.events_until("turn_end")
    finally:
        sock.close()
    answering.wait_for(state="hidden")
    page.wait_for_function("() => window.__notes.length === 1")
    assert page.evaluate("window.__notes") == [
        {"title": "Answer ready", "body": f"Background {model}"}
    ]
    unread = page.locator(f"#chat-{busy['id']} .unread-mark")
    assert unread.is_visible()
    shot(page, f"unread-{size}-{scheme}")

    page.locator(f"#chat-{busy['id']} .chat-link").click()
    page.wait_for_url(f"**/c/{busy['id']}")
    reveal_sidebar(page, size)
    assert page.locator(f"#chat-{busy['id']}").get_attribute("class").split().count("unread") == 0
    assert not page.locator(f"#chat-{busy['id']} .unread-mark").is_visible()
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_no_notification_for_the_chat_in_view_but_one_when_the_tab_is_hidden(
    open_page, api, scripted, size, scheme
):
    model = f"org-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(
        Scenario().text("Seen as it came."),
        Scenario().text("Finished while").stall().text(" away."),
        model=model,
    )
    page = open_page(size, scheme, "/settings/appearance", notifications=True)
    page.get_by_label(
        "Desktop notification when an answer finishes in a chat or tab I am not looking at"
    ).check()
    page.get_by_text("Notifications are on in this browser.").wait_for()
    page.goto(f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")

    page.fill("#composer-input", "First")
    page.press("#composer-input", "Enter")
    page.locator("#transcript").get_by_text("Seen as it came.").wait_for()
    page.wait_for_function(
        "() => document.querySelector('#composer-controls').getAttribute('data-running') !== '1'"
    )
    assert page.evaluate("window.__notes") == []

    # The tab goes to the background (the browser's visibility API says so), then it ends.
    page.fill("#composer-input", "Second")
    page.press("#composer-input", "Enter")
    page.locator("#transcript").get_by_text("Finished while").wait_for()
    page.evaluate("""() => { Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'}); }""")
    scripted.release()
    page.wait_for_function("() => window.__notes.length === 1")
    assert page.evaluate("window.__notes[0].title") == "Answer ready"
    assert page.errors == []


@pytest.mark.parametrize("theme", ["light", "dark"])
@SIZES_ON_BACKENDS
def test_axe_finds_no_serious_problems_in_the_new_views(open_page, api, size, theme, shot):
    from page_support import serious_violations

    mark = uuid.uuid4().hex[:6]
    pinned, tagged, archived = (
        new_titled_chat(api, f"{name} {mark}") for name in ("Pinned", "Tagged", "Archived")
    )
    api.call("PATCH", f"/api/session/{pinned}", {"pinned": True})
    api.call("PATCH", f"/api/session/{tagged}", {"tags": ["axe"]})
    api.call("PATCH", f"/api/session/{archived}", {"archived": True})
    page = open_page(
        size, "light" if theme == "dark" else "dark", "/settings/appearance"
    )  # the choice beats the system's
    choose_theme(page, theme)
    page.reload()
    try:
        shot(page, f"settings-{size}-{theme}")
        assert serious_violations(page) == []
        page.goto("/archived")
        assert serious_violations(page) == []
        page.goto("/")
        reveal_sidebar(page, size)
        page.evaluate(f"() => localStorage.setItem('numi:unread', '{tagged}')")
        page.reload()
        reveal_sidebar(page, size)
        open_row_menu(page, pinned)  # a row's "…" menu, open
        assert serious_violations(page) == []
        page.keyboard.press("Escape")
        chat_action(page, tagged, "Select chats")
        assert page.locator(f"#chat-{tagged}.unread .unread-mark").is_visible()
        shot(page, f"axe-sidebar-{size}-{theme}")
        assert serious_violations(page) == []
    finally:
        api.call("PATCH", "/api/preferences", {"theme": "system"})
        api.post("/api/sessions/bulk", {"action": "delete", "ids": [pinned, tagged, archived]})
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_move_to_a_project_from_a_rows_menu(open_page, api, size, scheme, shot):
    """A row's "…" holds Move to…, so a chat reaches a project without drag and drop: on a
    phone by touch (a tap on the "…", always shown there), on a desktop by mouse. The page
    stays where it was; the project lists the chat; a chat already in it offers the way out."""
    mark = uuid.uuid4().hex[:6]
    status, project = api.post("/api/projects", {"name": f"Garden {mark}"})
    assert status == 201
    here = new_titled_chat(api, f"Open one {mark}")
    moving = new_titled_chat(api, f"Roses {mark}")
    page = open_page(size, scheme, f"/c/{here}", touch=size == "phone")
    reveal_sidebar(page, size)
    item = page.locator(f"#chat-{moving}")
    more = item.locator(".row-menu-button")
    if size == "phone":
        more.tap()  # no hover on a touch screen: the "…" is there to tap
    else:
        item.hover()
        more.click()
    menu = item.locator(".row-menu .menu-items")
    menu.get_by_text("Move to…").click()
    target = menu.get_by_role("button", name=f"Garden {mark}")
    expect(target).to_be_visible()
    expect(target).to_be_in_viewport()
    shown = [b.inner_text() for b in menu.locator(".menu-item").all() if b.is_visible()]
    # (Other tests of the module's server have their own projects, listed too.)
    assert [t for t in shown if not t.startswith("Garden ") or mark in t] == [
        "Rename",
        "Pin",
        "Move to…",
        f"Garden {mark}",
        "Archive",
        "Select chats",
        "Delete",
    ]
    shot(page, f"row-menu-move-{size}-{scheme}", both_themes=True)
    target.tap() if size == "phone" else target.click()
    page.wait_for_url(f"**/c/{here}")
    count = page.locator(f'#sidebar-projects [data-project-id="{project["id"]}"] .project-count')
    expect(count).to_have_text("1")
    assert api.get(f"/api/session/{moving}")[1]["project_id"] == project["id"]

    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_search_opens_from_its_icon_and_closes_on_escape(open_page, api, size, scheme, shot):
    """The sidebar's search is an icon beside New chat: it opens the box (focused, Titles and
    Messages under it) by a click or Enter; Esc empties it, the list comes back whole, and
    closes it back to the icon."""
    mark = uuid.uuid4().hex[:6]
    wanted = new_titled_chat(api, f"Lisbon trip {mark}")
    other = new_titled_chat(api, f"Tax return {mark}")
    page = open_page(size, scheme)
    reveal_sidebar(page, size)
    search = page.get_by_role("searchbox", name="Search chats")
    icon = page.locator("#search-toggle > summary")
    assert icon.is_visible() and not search.is_visible()
    assert not page.locator(".search-mode").is_visible()

    icon.click()
    page.wait_for_function("() => document.activeElement.id === 'chat-search'")
    assert page.locator(".search-mode").is_visible()
    search.press_sequentially(f"lisbon trip {mark}")
    page.locator(f"#chat-{other}").wait_for(state="detached")
    assert page.locator(f"#chat-{wanted}").is_visible()
    shot(page, f"sidebar-search-{size}-{scheme}", both_themes=True)
    assert serious_violations(page, "#sidebar") == []

    page.keyboard.press("Escape")
    page.locator(f"#chat-{other}").wait_for()  # the whole list again
    assert page.locator("#chat-search").input_value() == ""
    assert not search.is_visible()
    assert page.evaluate("() => document.activeElement.closest('#search-toggle') !== null")

    # From the keyboard: Enter on the icon opens it again, focused and empty.
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.activeElement.id === 'chat-search'")
    assert search.is_visible()
    assert page.errors == []
