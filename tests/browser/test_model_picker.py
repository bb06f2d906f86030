"""The model picker as a person uses it (issue 25 item 4), in real headless Chromium at
1280×800 and 390×844, light and dark: every model the server lists is offered (fetched
when the endpoint was added), the picker is searched by keyboard and a model picked with
Enter, each model's hints (tools, vision, reasoning, context) stay whole on a phone, an
endpoint that lists nothing is never preselected, and an edit in Settings (hiding one
model) keeps the rest of the list."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from numi.testing import ScriptedProvider
from page_support import LOOKS, serious_violations
from turn_support import wait_until

pytestmark = pytest.mark.browser

MODELS = [
    {"id": "gpt-4o"},
    {"id": "o3-mini"},
    {"id": "llama3.1:8b", "context_length": 8192},
    {"id": "claude-sonnet-4-5"},
    {"id": "deepseek-r1:7b"},
    {"id": "qwen2.5-coder:32b-instruct-q4_K_M-with-a-long-gateway-alias"},
]
REASONING = ["o3-mini", "claude-sonnet-4-5", "deepseek-r1:7b"]  # in the list's order


@pytest.fixture(scope="module")
def servers():
    """A server listing MODELS, and one listing nothing (named to sort first)."""
    with ScriptedProvider(models=MODELS) as full, ScriptedProvider(models=[]) as empty:
        yield full, empty


def add_endpoints(api, servers) -> tuple[dict, dict]:
    full, empty = servers
    for earlier in api.get("/api/endpoints")[1]["endpoints"]:  # each test starts with none
        assert api.call("DELETE", f"/api/endpoints/{earlier['id']}")[0] == 200
    tag = uuid.uuid4().hex[:6]
    status, nothing = api.post(
        "/api/endpoints",
        {"name": f"A empty {tag}", "kind": "openai_chat", "base_url": empty.openai_base_url},
    )
    assert status == 201 and nothing["models"] == [], nothing
    status, endpoint = api.post(
        "/api/endpoints",
        {
            "name": f"B scripted {tag}",
            "kind": "openai_chat",
            "base_url": full.openai_base_url,
            "default_model": "gpt-4o",
        },
    )
    # Added without pressing "Test & refresh": the whole list is there already.
    assert status == 201 and endpoint["models"] == [m["id"] for m in MODELS], endpoint
    return nothing, endpoint


def hints_cut_off(page) -> list[str]:
    """Hints of the open picker that do not lie whole inside the popup and the window."""
    return page.evaluate(
        """() => {
          const pop = document.querySelector('.picker-pop:popover-open').getBoundingClientRect();
          return [...document.querySelectorAll('.picker-pop:popover-open .picker-hint')]
            .filter((h) => h.offsetParent)
            .map((h) => [h, h.getBoundingClientRect()])
            .filter(([h, r]) => r.left < pop.left || r.right > pop.right + 0.5
              || r.right > innerWidth || h.scrollWidth > h.clientWidth + 1)
            .map(([h]) => h.textContent);
        }"""
    )


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_search_the_picker_by_keyboard_and_pick(
    site, api, servers, open_page_on, shot, size, scheme
):
    nothing, endpoint = add_endpoints(api, servers)
    status, chat = api.post("/api/session", {})
    # A new chat starts on the endpoint that lists models, never on the empty one.
    assert status == 201 and (chat["endpoint_id"], chat["model"]) == (endpoint["id"], "gpt-4o")

    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    header = page.locator("#chat-header")
    button = header.get_by_role("button", name="Model: gpt-4o")
    button.click()
    search = page.get_by_role("combobox", name="Search models")
    expect(search).to_be_focused()
    listbox = page.get_by_role("listbox", name="Models")
    # Every listed model, the empty endpoint's line disabled.
    expect(listbox.get_by_role("option")).to_have_count(len(MODELS) + 1)
    expect(listbox.get_by_role("option", name="(no models listed)")).to_be_disabled()

    page.keyboard.type("reasoning")
    expect(listbox.get_by_role("option")).to_have_count(len(REASONING))
    expect(search).to_have_attribute(
        "aria-activedescendant", listbox.get_by_role("option").first.get_attribute("id")
    )
    page.keyboard.press("ArrowDown")
    second = listbox.get_by_role("option", name=REASONING[1])
    expect(second).to_have_class("picker-option active")
    expect(search).to_have_attribute("aria-activedescendant", second.get_attribute("id"))
    assert hints_cut_off(page) == []
    shot(page, f"picker-search-{size}-{scheme}")
    assert serious_violations(page) == []

    page.evaluate("() => { document.querySelector('#header-model').dataset.before = '1'; }")
    page.keyboard.press("Enter")
    wait_until(
        lambda: api.get(f"/api/session/{chat['id']}")[1]["model"] == REASONING[1],
        what="the picked model saved",
    )
    # The header is swapped in anew (its select is another element): focus stays on the picker.
    page.wait_for_function("() => !document.querySelector('#header-model').dataset.before")
    picked = header.get_by_role("button", name=f"Model: {REASONING[1]}")
    expect(picked).to_be_focused()
    assert not page.locator(".chat-settings .settings-form").is_visible()

    # Escape closes without picking; a search that finds nothing says so.
    picked.press("Enter")
    expect(search).to_be_focused()
    page.keyboard.type("no such model")
    # This picker's own line: the page also holds the Compare picker's, hidden.
    expect(page.locator(".picker-empty", has_text="No model matches.")).to_be_visible()
    page.keyboard.press("Escape")
    expect(listbox).to_be_hidden()
    expect(picked).to_be_focused()
    shot(page, f"picker-picked-{size}-{scheme}")
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_home_picker_shows_every_hint_and_never_preselects_an_empty_endpoint(
    site, api, servers, open_page_on, shot, size, scheme
):
    nothing, endpoint = add_endpoints(api, servers)
    page = open_page_on(site, size, scheme, "/")
    composer = page.locator(".home-composer")
    # The first endpoint by name lists nothing: the default route's model is chosen instead.
    expect(composer.locator("select[name=route]")).to_have_value(f"{endpoint['id']}:gpt-4o")
    composer.get_by_role("button", name="Model: gpt-4o").click()
    page.keyboard.type("qwen")
    option = page.get_by_role("option", name="qwen2.5-coder")
    expect(option).to_be_visible()
    assert hints_cut_off(page) == []
    shot(page, f"picker-home-{size}-{scheme}")
    option.click()
    expect(composer.get_by_role("button", name="Model: qwen2.5-coder:32b")).to_be_visible()
    assert composer.locator("select[name=route]").input_value().endswith(":" + MODELS[-1]["id"])
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_an_edit_in_settings_keeps_the_list(site, api, servers, open_page_on, shot, size, scheme):
    nothing, endpoint = add_endpoints(api, servers)
    status, chat = api.post("/api/session", {"endpoint_id": endpoint["id"], "model": "gpt-4o"})
    assert status == 201, chat
    page = open_page_on(site, size, scheme, "/settings/endpoints")
    name = endpoint["name"]
    page.locator(f"#endpoint-{endpoint['id']}").get_by_role("link", name=f"Edit {name}").click()
    form = page.locator(f"form#endpoint-{endpoint['id']}")
    form.get_by_role("checkbox", name="llama3.1:8b").check()
    form.get_by_role("button", name="Save").click()
    card = page.locator(f"div#endpoint-{endpoint['id']}")
    card.locator(".endpoint-status", has_text="Saved.").wait_for()
    expect(card).to_contain_text(f"{len(MODELS)} models (1 hidden)")

    page.goto(f"/c/{chat['id']}")
    page.locator("#chat-header").get_by_role("button", name="Model: gpt-4o").click()
    group = page.get_by_role("group", name=name)
    expect(group.get_by_role("option")).to_have_count(len(MODELS) - 1)
    expect(group.get_by_role("option", name="llama3.1:8b")).to_have_count(0)
    shot(page, f"picker-after-edit-{size}-{scheme}")
    listed = next(e for e in api.get("/api/endpoints")[1]["endpoints"] if e["id"] == endpoint["id"])
    assert listed["models"] == [m["id"] for m in MODELS] and listed["hidden_models"] == [
        "llama3.1:8b"
    ]
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_regenerate_with_another_model_from_its_picker(
    site, api, servers, open_page_on, size, scheme, shot
):
    full, _ = servers
    nothing, endpoint = add_endpoints(api, servers)
    status, chat = api.post("/api/session", {"endpoint_id": endpoint["id"], "model": "gpt-4o"})
    assert status == 201, chat
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "Hello")
    page.press("#composer-input", "Enter")
    # The turn's end swaps the answer whole: open its picker once the answer is saved.
    page.locator(".msg-assistant .msg-actions").first.wait_for()
    expect(page.locator("#transcript .turn-live")).to_have_count(0)
    answer = page.locator(".msg-assistant .msg-actions").last
    answer.get_by_title("Answer again with another model").click()  # built when it opens
    answer.get_by_role("button", name="Model: gpt-4o").click()
    # Typing goes to the search box once the opened list has given it the focus.
    expect(page.locator(".picker-pop:popover-open .picker-search")).to_be_focused()
    page.keyboard.type("o3")
    expect(page.get_by_role("option", name="o3-mini")).to_have_class("picker-option active")
    shot(page, f"regenerate-picker-{size}")
    page.keyboard.press("Enter")
    expect(answer.get_by_role("button", name="Model: o3-mini")).to_be_focused()
    calls = len(full.requests)
    answer.get_by_role("button", name="Regenerate").click()
    wait_until(
        lambda: any((r.body or {}).get("model") == "o3-mini" for r in full.requests[calls:]),
        what="the answer asked again of o3-mini",
    )
    # After a reload its options come from the page's one template, copied in on opening.
    page.reload()
    answer = page.locator(".msg-assistant .msg-actions").last
    answer.get_by_title("Answer again with another model").click()
    answer.get_by_role("button", name="Model: o3-mini").click()
    expect(page.locator(".picker-pop:popover-open .picker-search")).to_be_focused()
    page.keyboard.type("gpt-4o")
    page.keyboard.press("Enter")
    expect(answer.get_by_role("button", name="Model: gpt-4o")).to_be_focused()
    assert answer.locator("select[name=route]").input_value() == f"{endpoint['id']}:gpt-4o"
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_a_projects_default_model_is_picked_inside_its_label(
    site, api, servers, open_page_on, size, scheme
):
    nothing, endpoint = add_endpoints(api, servers)
    status, project = api.post("/api/projects", {"name": f"Picker {uuid.uuid4().hex[:6]}"})
    assert status == 201, project
    page = open_page_on(site, size, scheme, f"/p/{project['id']}")
    form = page.locator("#project-defaults")
    form.locator(".picker-button").click()
    page.keyboard.type("deepseek")
    # A click (not Enter) on the option: the <label> around the picker must not take it.
    page.get_by_role("option", name="deepseek-r1:7b").click()
    expect(form.get_by_role("button", name="Model: deepseek-r1:7b")).to_be_focused()
    form.get_by_role("button", name="Save defaults").click()
    page.locator("#project-defaults .saved").wait_for()
    settings = api.get(f"/api/projects/{project['id']}")[1]["settings"]
    assert (settings["endpoint_id"], settings["model"]) == (endpoint["id"], "deepseek-r1:7b")
    assert page.errors == []
