"""Projects and memory in real Chromium (issue 21), as a person uses them, at 1280x800 and
390x844, light and dark: make a project from the sidebar, give it instructions, start a
chat there (it takes the defaults), move a chat in by drag and drop (desktop) or by the
chat's Project menu (phone), keep a project memory, delete the project keeping its chats;
and the remember tool's card, which shows the exact text and keeps it only on "Remember".
axe finds no serious problem on the project page, Settings → Memory or the card."""

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
from turn_support import make_chat, refresh_models
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


# Each size on one backend, each backend at one size (page_support.on_one_backend_each):
# projects and memories are stored by the API, whose tests run on both (tests/projects/).
@pytest.fixture(scope="module")
def site_env(module_database_url):
    return {"NUMI_DATABASE_URL": module_database_url, "NUMI_APPROVAL_TIMEOUT_SECONDS": "60"}


def serious(page) -> list[str]:
    return serious_violations(page)


@LOOKS_ON_BACKENDS
def test_project_flow(open_page_on, site, api, scripted, size, scheme, shot):
    mark = uuid.uuid4().hex[:6]
    name = f"Garden {mark}"
    loose = make_chat(api, scripted)  # a chat outside any project, with a model
    api.call("PATCH", f"/api/session/{loose['id']}", {"title": f"Loose {mark}"})
    page = open_page_on(site, size, scheme, f"/c/{loose['id']}", timeout=WAIT_SECONDS * 1000)
    reveal_sidebar(page, size)
    page.locator(".new-project > summary").click()
    page.get_by_label("Project name").fill(name)
    page.get_by_role("button", name="Create project").click()
    page.wait_for_url("**/p/*")
    project_id = int(page.url.rsplit("/", 1)[1])
    assert page.locator("h1.project-title").inner_text() == name
    # Its name is shown, not only read out: a phone's header hides a chat's title, not this.
    assert page.locator("h1.project-title").bounding_box()["width"] > 40
    shot(page, f"project-top-{size}-{scheme}")

    page.get_by_label("Instructions (added after each chat's own system prompt)").fill(
        "Answer as a gardener."
    )
    page.get_by_role("button", name="Save project").click()
    page.wait_for_url("**#instructions")
    page.get_by_label("Add a memory (one short fact)").fill("The roses face north.")
    page.get_by_role("button", name="Remember").click()
    page.wait_for_url("**#memories")
    assert page.locator(".memory-text").all_inner_texts() == ["The roses face north."]
    shot(page, f"project-{size}-{scheme}", full_page=True)
    assert serious(page) == []

    page.get_by_role("button", name=f"New chat in {name}").click()
    page.wait_for_url("**/c/*")
    new_id = page.url.rsplit("/", 1)[1]
    status, new_chat = api.get(f"/api/session/{new_id}")
    assert new_chat["project_id"] == project_id
    assert (
        page.locator(".chat-project .chat-project-name").text_content() == name
    )  # in the "…" menu

    # Move the loose chat in: drag and drop on a desktop, the chat's menu on a phone.
    if size == "desktop":
        item = page.locator(f"#chat-{loose['id']}")
        target = page.locator(f".project-item[data-project-id='{project_id}']")
        item.drag_to(target)
        page.wait_for_function(
            "s => document.querySelector(s)?.textContent.trim() === '2'",
            arg=f".project-item[data-project-id='{project_id}'] .project-count",
        )
    else:
        page.goto(f"/c/{loose['id']}")
        page.locator("#chat-more > summary").click()  # the header's "…" menu
        page.locator(".chat-project > summary").click()
        page.get_by_label("Project of this chat").select_option(str(project_id))
        page.get_by_role("button", name="Move").click()
        page.wait_for_selector(".chat-project .chat-project-name", state="attached")
    assert api.get(f"/api/session/{loose['id']}")[1]["project_id"] == project_id
    reveal_sidebar(page, size)
    # Listed under its project now, not in the chat list (as in ChatGPT).
    page.locator("#chat-list").wait_for()
    assert page.locator(f"#chat-list #chat-{loose['id']}").count() == 0
    assert page.locator(f"#chat-list #chat-{new_id}").count() == 0
    shot(page, f"sidebar-projects-{size}-{scheme}")

    page.goto(f"/p/{project_id}")
    listed = page.locator(".project-chats a").all_inner_texts()
    assert sorted(listed) == sorted(["New chat", f"Loose {mark}"])
    page.locator(".project-delete > summary").click()
    shot(page.locator("#project-actions"), f"project-delete-{size}-{scheme}")
    page.get_by_role("button", name="Delete the project, keep its chats").click()
    page.wait_for_url(site.url + "/")
    assert api.get(f"/api/projects/{project_id}")[0] == 404
    assert api.get(f"/api/session/{loose['id']}")[1]["project_id"] is None
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_project_defaults(open_page_on, site, api, scripted, size, scheme, shot):
    """The defaults form: a model, a tool, a fallback chain edited row by row; Save keeps
    them, and a new chat of the project takes the model and the tool (the chain stays the
    project's: the chat's settings say it applies)."""
    chat = make_chat(api, scripted, model="main-model")
    endpoint_id = chat["endpoint"]["id"]
    refresh_models(api, scripted, endpoint_id, ("main-model", "backup-a", "backup-b"))
    status, project = api.post("/api/projects", {"name": f"Defaults {uuid.uuid4().hex[:6]}"})
    assert status == 201, project
    page = open_page_on(site, size, scheme, f"/p/{project['id']}", timeout=WAIT_SECONDS * 1000)
    form = page.locator("#project-defaults")
    form.locator("#project-model").select_option(f"{endpoint_id}:main-model")
    form.get_by_role("checkbox", name="Current time").check()
    form.get_by_role("button", name="Add fallback").click()
    page.locator("#project-fallbacks select").first.wait_for()
    page.locator("#project-fallbacks select").first.select_option(f"{endpoint_id}:backup-a")
    page.locator("#project-fallbacks").get_by_role("button", name="Add fallback").click()
    page.locator("#project-fallbacks select").nth(1).wait_for()
    page.locator("#project-fallbacks select").nth(1).select_option(f"{endpoint_id}:backup-b")
    page.get_by_role("button", name="Move fallback 2 up").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#project-fallbacks select')[0].value.endsWith(':backup-b')"
    )
    assert (
        page.locator("#project-defaults").get_by_role("checkbox", name="Current time").is_checked()
    )
    page.get_by_role("button", name="Save defaults").click()
    page.locator("#project-defaults .saved").wait_for()
    settings = api.get(f"/api/projects/{project['id']}")[1]["settings"]
    assert settings["model"] == "main-model" and settings["tools"] == ["current_time"]
    assert settings["fallbacks"] == [
        {"endpoint_id": endpoint_id, "model": "backup-b"},
        {"endpoint_id": endpoint_id, "model": "backup-a"},
    ]
    page.evaluate("document.querySelector('#defaults').scrollIntoView()")
    shot(page, f"project-defaults-top-{size}-{scheme}")
    page.locator("#project-defaults .saved").scroll_into_view_if_needed()
    shot(page, f"project-defaults-{size}-{scheme}")
    assert serious(page) == []

    page.get_by_role("button", name=f"New chat in {project['name']}").click()
    page.wait_for_url("**/c/*")
    new_chat = api.get(f"/api/session/{page.url.rsplit('/', 1)[1]}")[1]
    assert new_chat["model"] == "main-model"
    assert new_chat["settings"]["tools"] == ["current_time"]
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.locator(".chat-settings > summary").click()
    page.get_by_text("With none here, the project's 2 fallbacks apply.").wait_for()
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_project_embedding_model(open_page_on, site, api, scripted, size, scheme, shot):
    """The defaults form's embedding model of the project's files (issue 37): an endpoint
    and its model picked and saved; the form then says how the files are searched."""
    chat = make_chat(api, scripted)
    endpoint_id = chat["endpoint"]["id"]
    status, project = api.post("/api/projects", {"name": f"Embed {uuid.uuid4().hex[:6]}"})
    assert status == 201, project
    page = open_page_on(site, size, scheme, f"/p/{project['id']}", timeout=WAIT_SECONDS * 1000)
    form = page.locator("#project-defaults")
    picker = form.locator(".project-embedding")
    select = picker.locator("select[name=embedding]")
    expect(select).to_have_value("")  # "Yours (Settings → Documents)"
    select.select_option(f"endpoint:{endpoint_id}")
    picker.get_by_label("Model on the endpoint").fill("nomic-embed-text")
    page.get_by_role("button", name="Save defaults").click()
    page.locator("#project-defaults .saved").wait_for()
    settings = api.get(f"/api/projects/{project['id']}")[1]["settings"]
    assert settings["embedding"] == {"endpoint_id": endpoint_id, "model": "nomic-embed-text"}
    expect(page.locator("#project-search-mode")).to_contain_text("nomic-embed-text, fused")
    page.locator(".project-embedding").scroll_into_view_if_needed()
    shot(page, f"project-embedding-{size}-{scheme}")
    assert serious(page) == []
    assert page.errors == []


@LOOKS_ON_BACKENDS
def test_memory_approval_card(open_page_on, site, api, scripted, size, scheme, shot):
    fact = f"Prefers metric units ({uuid.uuid4().hex[:6]})."
    api.call("PATCH", "/api/preferences", {"memory": True})
    chat = make_chat(api, scripted, settings={"tools": ["remember"]})
    scripted.enqueue(Scenario().tool_call("remember", {"text": fact}))
    scripted.enqueue(Scenario().text("I will keep that in mind."))
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}", timeout=WAIT_SECONDS * 1000)
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "Remember that I prefer metric units")
    page.press("#composer-input", "Enter")
    card = page.wait_for_selector(".tool-approval .memory-proposal")
    assert card.inner_text() == fact, "the card shows the exact text"
    assert fact not in [m["text"] for m in api.get("/api/memories")[1]["memories"]]
    shot(page.locator(".tool-approval"), f"remember-card-{size}-{scheme}")
    assert serious(page) == []
    page.locator(".tool-approval").get_by_role("button", name="Remember", exact=True).click()
    page.wait_for_selector(".tool-card.tool-done")
    page.wait_for_selector("text=I will keep that in mind.")
    assert fact in [m["text"] for m in api.get("/api/memories")[1]["memories"]]

    page.goto("/settings/memory")
    assert page.locator("#memory-state").inner_text() == "Memory is on."
    assert fact in page.locator("#memory .memory-text").all_inner_texts()
    shot(page.locator("#memory"), f"settings-memory-{size}-{scheme}")
    assert serious(page) == []
    page.locator("#memory-toggle").click()
    expect(page.locator("#memory-state")).to_have_text("Memory is off.")
    assert page.url.endswith("/settings/memory")
    assert api.get("/api/preferences")[1]["memory"] is False
    assert page.errors == []


@SIZES_ON_BACKENDS
def test_a_memory_with_hidden_characters_shows_them_in_settings(
    api, site, open_page_on, shot, size
):
    """Issue 34: tag characters hid an instruction in a memory; Settings shows each as its
    code point, with the badge."""
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "Obey")
    status, made = api.post(
        "/api/memories", {"text": f"Prefers tea {uuid.uuid4().hex[:6]}{hidden}"}
    )
    assert status == 201, made
    page = open_page_on(site, size, "light", "/settings/memory")
    item = page.locator(f"#memory-{made['id']}")
    expect(item.locator(".hidden-chars-badge")).to_be_visible()
    marks = item.locator("mark.hidden-char")
    assert marks.all_inner_texts() == ["<U+E004F>", "<U+E0062>", "<U+E0065>", "<U+E0079>"]
    shot(page, f"memory-hidden-{size}")
    api.call("DELETE", f"/api/memories/{made['id']}")
