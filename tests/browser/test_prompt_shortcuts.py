"""Saved prompts in real headless Chromium, at 1280×800 on SQLite and at 390×844 on
PostgreSQL: add, edit and delete prompts in Settings; in the composer, "/" opens the list,
the keyboard moves through it (ArrowDown/ArrowUp, Escape closes, typing filters), Enter
picks one whose {{input}} takes what was typed after the command and whose {{clipboard}}
takes the clipboard's text, and the question sent is that text; Tab picks with the cursor
left where {{input}} was; the mouse picks too. axe-core finds nothing serious."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from page_support import serious_violations
from turn_support import Api, make_chat, turn_server_env
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture
def server(live_server_factory, database_url):
    """A live server on this test's backend (a fresh database of `database_url`)."""
    started = live_server_factory(**turn_server_env(NUMI_DATABASE_URL=database_url))
    yield started
    started.kill()


def _state(page) -> dict:
    """What a screen reader is told: expanded or not, which option is active, which show."""
    return page.evaluate("""() => {
        const box = document.getElementById("composer-input");
        const active = document.getElementById(box.getAttribute("aria-activedescendant") || "-");
        return {expanded: box.getAttribute("aria-expanded"),
                active: active && active.getAttribute("aria-selected") === "true" ? active.dataset.command : null,
                shown: [...document.querySelectorAll("#prompt-list li:not([hidden])")].map(li => li.dataset.command),
                visible: !!document.querySelector("#prompt-list:not([hidden])")};
    }""")


# Each size on one backend, each backend at one size: what is stored and refused is the
# API's, and tests/web/test_prompts.py runs all of it on both; the page's part does not
# differ by database. The four pairs cost 63 s of the suite (20 s each at desktop size).
@pytest.mark.parametrize(
    "backend,viewport",
    [("sqlite", "desktop"), pytest.param("postgres", "phone", marks=pytest.mark.postgres)],
    indirect=["backend"],
)
@pytest.mark.slow(
    reason="one user's whole path through saved prompts in a real browser: created in "
    "Settings, used, edited and refused in the composer, at each size"
)
def test_prompts_in_settings_and_the_composer(browser, server, scripted, viewport, shot):
    api = Api(server.url)
    chat = make_chat(api, scripted)
    # One made through the API; the others in Settings.
    status, _ = api.post(
        "/api/prompts",
        {"command": "ask", "title": "Ask briefly", "text": "Question: {{input}} (answer briefly)"},
    )
    assert status == 201

    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = context.new_page()
    page.set_default_timeout(WAIT_SECONDS * 1000)
    errors: list[str] = []
    page.on(
        "console",
        lambda m: (
            errors.append(m.text) if m.type == "error" and "WebSocket" not in m.text else None
        ),
    )
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        server.sign_in(page, "/settings/prompts")
        section = page.locator("#prompts-section")
        add = page.locator("#prompt-add-form")

        # A refused add: the error shows by the form, the typed text stays, nothing is saved.
        add.get_by_label("Command").fill("Explain")
        add.get_by_label("Title").fill("Explain it")
        add.get_by_label("Text").fill("Explain {{clipboard}} to me: {{input}}")
        # The browser's own pattern check would stop the form first; the server's is the one
        # that counts, so it is what this test sees.
        page.evaluate(
            "document.querySelector('#prompt-add-form input[name=command]').removeAttribute('pattern')"
        )
        add.get_by_role("button", name="Add prompt").click()
        alert = page.locator("#prompt-add-form .form-error")
        alert.wait_for()
        assert alert.get_attribute("data-code") == "invalid_command"
        assert (
            page.locator("#prompt-add-form").get_by_label("Text").input_value()
            == "Explain {{clipboard}} to me: {{input}}"
        )
        # (The browser logs the 400 of that refusal, as it logs every error status.)
        assert errors and all("400" in e for e in errors), errors
        errors.clear()

        page.locator("#prompt-add-form").get_by_label("Command").fill("explain")
        page.locator("#prompt-add-form").get_by_role("button", name="Add prompt").click()
        section.locator(".prompt-command", has_text="/explain").wait_for()
        assert (
            page.locator("#prompt-add-form").get_by_label("Command").input_value() == ""
        )  # empty again
        # ... and the focus is in it, ready for the next one.
        page.wait_for_function(
            "() => document.activeElement && document.activeElement.name === 'command'"
        )
        page.locator("#prompt-add-form").get_by_label("Command").fill("old")
        page.locator("#prompt-add-form").get_by_label("Title").fill("To delete")
        page.locator("#prompt-add-form").get_by_label("Text").fill("Gone soon")
        page.locator("#prompt-add-form").get_by_role("button", name="Add prompt").click()
        section.locator(".prompt-command", has_text="/old").wait_for()

        # Edit: a new title for /explain.
        item = section.locator(
            ".prompt-item", has=page.locator(".prompt-command", has_text="/explain")
        )
        item.locator("summary").click()
        item.get_by_label("Title").fill("Explain simply")
        shot(item, f"edit-{viewport}")
        item.get_by_role("button", name="Save").click()
        section.locator(".prompt-title", has_text="Explain simply").wait_for()
        # Delete /old.
        section.get_by_role("button", name="Delete /old").click()
        section.locator(".prompt-command", has_text="/old").wait_for(state="detached")
        assert section.locator(".prompt-command").all_inner_texts() == ["/ask", "/explain"]
        page.locator("#prompts").scroll_into_view_if_needed()
        shot(page.locator("#prompts"), f"settings-{viewport}")
        assert serious_violations(page, "#prompts") == []

        # The composer: "/" opens the list with both prompts, the first one active.
        page.evaluate("navigator.clipboard.writeText('photosynthesis')")
        page.goto(f"/c/{chat['id']}")
        page.wait_for_selector("#connection[data-state=open]", state="attached")
        box = page.locator("#composer-input")
        box.click()
        page.keyboard.type("/")
        page.wait_for_function("() => !document.getElementById('prompt-list').hidden")
        assert _state(page) == {
            "expanded": "true",
            "active": "ask",
            "shown": ["ask", "explain"],
            "visible": True,
        }
        page.keyboard.press("ArrowDown")
        assert _state(page)["active"] == "explain"
        page.keyboard.press("ArrowDown")  # wraps around
        assert _state(page)["active"] == "ask"
        page.keyboard.press("ArrowUp")
        assert _state(page)["active"] == "explain"
        assert page.locator("#prompt-list").is_visible()
        shot(page, f"list-{viewport}")
        assert serious_violations(page, ".composer") == []
        page.keyboard.press("Escape")
        assert _state(page)["expanded"] == "false" and not page.locator("#prompt-list").is_visible()
        assert box.input_value() == "/"  # Escape only closed the list

        # Typing filters; what follows the command is the {{input}}; Enter picks.
        page.keyboard.type("ex")
        assert _state(page) == {
            "expanded": "true",
            "active": "explain",
            "shown": ["explain"],
            "visible": True,
        }
        page.keyboard.type(" to a child")
        assert _state(page)["active"] == "explain"
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('composer-input').value.startsWith('Explain')"
        )
        assert box.input_value() == "Explain photosynthesis to me: to a child"
        assert _state(page)["expanded"] == "false"

        # Enter again sends it, and the question sent is the filled text.
        scripted.enqueue(Scenario().text("Plants make sugar from light."))
        page.keyboard.press("Enter")
        page.locator(
            "article.msg-user", has_text="Explain photosynthesis to me: to a child"
        ).wait_for()
        page.wait_for_function(
            "() => document.body.innerText.includes('Plants make sugar from light.')"
        )
        sent = [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"]
        assert sent == ["Explain photosynthesis to me: to a child"]
        page.wait_for_function("() => document.getElementById('composer-input').value === ''")

        # Tab picks too; with nothing typed after the command the cursor waits where {{input}} was.
        box.click()
        page.keyboard.type("/as")
        page.keyboard.press("Tab")
        page.wait_for_function(
            "() => document.getElementById('composer-input').value.startsWith('Question')"
        )
        assert box.input_value() == "Question:  (answer briefly)"
        assert page.evaluate("document.activeElement.id") == "composer-input"
        page.keyboard.type("why is the sky blue?")
        assert box.input_value() == "Question: why is the sky blue? (answer briefly)"

        # The mouse: a click on an option picks it.
        box.fill("")
        page.keyboard.type("/")
        page.locator("#prompt-list li", has_text="/explain").click()
        page.wait_for_function(
            "() => document.getElementById('composer-input').value.startsWith('Explain')"
        )
        assert box.input_value() == "Explain photosynthesis to me: "
        assert page.evaluate("document.activeElement.id") == "composer-input"
        assert errors == []
    finally:
        context.close()

    # A browser that refuses the clipboard: {{clipboard}} is left empty, the rest still works.
    refused = browser.new_context(viewport=VIEWPORTS[viewport], base_url=server.url)
    try:
        page = refused.new_page()
        page.set_default_timeout(WAIT_SECONDS * 1000)
        server.sign_in(page, f"/c/{chat['id']}")
        page.locator("#composer-input").click()
        page.keyboard.type("/explain gravity")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('composer-input').value.startsWith('Explain')"
        )
        assert page.locator("#composer-input").input_value() == "Explain  to me: gravity"
    finally:
        refused.close()
