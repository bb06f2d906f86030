"""Real headless Chromium at 1280x800 and 390x844, light and dark: the context gauge opens
the context panel, a message leaves the context from the panel and comes back from its
menu, and the fallback editor (chat settings and Settings) adds, reorders, removes and
saves rows. axe-core finds no serious problem; screenshots are saved under tmp_path."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS
from turn_support import Socket, make_chat, refresh_models
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


def answered(site, chat_id: str, *questions: str) -> None:
    socket = Socket(site, chat_id)
    try:
        for question in questions:
            socket.send(type="send", message=question)
            socket.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        socket.close()


def serious(page) -> list[str]:
    from page_support import serious_violations

    return serious_violations(page)


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_the_context_panel_lays_the_request_open(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(
        api, scripted, settings={"system_prompt": "Be brief <and> kind.", "tools": ["echo"]}
    )
    answered(site, chat["id"], "first question about walruses", "second question about oysters")
    first = api.history(chat["id"])[0]
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    gauge = page.locator("#context-gauge .gauge-button")
    gauge.wait_for()
    assert page.locator("#context-panel").is_hidden()
    gauge.click()
    panel = page.locator("#context-panel")
    panel.locator(".context-part[data-kind=history]").wait_for()
    assert gauge.get_attribute("aria-expanded") == "true"
    kinds = panel.locator(".context-part").evaluate_all(
        "parts => parts.map(p => p.getAttribute('data-kind'))"
    )
    assert kinds == [
        "system_prompt",
        "project_instructions",
        "memories",
        "summary",
        "history",
        "attachments",
        "tools",
    ]
    assert "Estimated from characters" in panel.locator(".estimate-kind").inner_text() or (
        "Calibrated" in panel.locator(".estimate-kind").inner_text()
    )
    # Each part expands to its text (escaped: the prompt's <and> is text).
    panel.locator(".context-part[data-kind=system_prompt] summary").click()
    assert (
        "Be brief <and> kind."
        in panel.locator(".context-part[data-kind=system_prompt] pre").inner_text()
    )
    panel.locator(".context-part[data-kind=tools] summary").click()
    assert '"echo"' in panel.locator(".context-part[data-kind=tools] pre").inner_text()
    history = panel.locator(".context-part[data-kind=history]")
    history.locator("summary").click()
    assert "4 included · 0 omitted · 0 left out" in history.locator("summary").inner_text()
    shot(page, f"context-panel-{size}-{scheme}", both_themes=True)
    assert serious(page) == []

    # Leave the first question out from the panel: the panel counts it, the transcript marks it.
    history.locator(f".context-message[data-message-id='{first['id']}'] button").click()
    page.locator(".context-part[data-kind=history] .left-out-title").wait_for()
    page.locator(f"#msg-{first['id']}.msg-left-out .left-out-badge").wait_for()
    assert "1 left out" in page.locator(".context-part[data-kind=history] summary").inner_text()
    assert api.history(chat["id"])[0]["in_context"] is False
    shot(page, f"context-left-out-{size}-{scheme}")
    assert serious(page) == []

    # Bring it back from the message's own "…" menu, where it says so in words.
    page.locator(f"#msg-{first['id']} .msg-more > summary").click()
    page.locator(f"#msg-{first['id']}").get_by_role(
        "button", name="Bring back into context"
    ).click()
    page.wait_for_function(
        f"() => !document.querySelector('#msg-{first['id']}').classList.contains('msg-left-out')"
    )
    assert api.history(chat["id"])[0]["in_context"] is True
    # The gauge and the open panel follow.
    page.wait_for_function(
        "() => document.querySelector('.context-part[data-kind=history] summary')?.textContent.includes('0 left out')"
    )
    page.locator(".context-part[data-kind=history] summary").focus()
    page.keyboard.press("Escape")  # closes the panel, focus back on the gauge
    # Waited for, not read at once: under load the close lands a frame after the key.
    expect(page.locator("#context-panel")).to_be_hidden()
    expect(gauge).to_be_focused()
    gauge.click()
    page.locator("#context-panel .context-part").first.wait_for()
    page.locator("#context-panel-close").click()
    expect(page.locator("#context-panel")).to_be_hidden()
    assert page.errors == []


@pytest.mark.parametrize(
    "size, scheme", [("desktop", "light"), ("phone", "dark")], ids=["desktop-light", "phone-dark"]
)
def test_the_context_panel_shows_the_projects_parts(
    open_page_on, site, api, scripted, shot, size, scheme
):
    """A chat in a project, memory on: the project's instructions and the memories are
    parts of their own, with tokens, and expand to the text the model gets."""
    status, project = api.post(
        "/api/projects",
        {"name": f"Orchard {size}", "instructions": "Name every apple <variety> you mention."},
    )
    assert status == 201, project
    chat = make_chat(api, scripted)
    api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    api.post("/api/memories", {"text": f"The orchard ({size}) has forty trees."})
    api.post("/api/memories", {"text": "Pick in October.", "project_id": project["id"]})
    answered(site, chat["id"], "which apples keep best?")
    api.call("PATCH", "/api/preferences", {"memory": True})
    try:
        page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
        page.locator("#context-gauge .gauge-button").click()
        panel = page.locator("#context-panel")
        instructions = panel.locator(".context-part[data-kind=project_instructions]")
        memories = panel.locator(".context-part[data-kind=memories]")
        instructions.wait_for()
        for part in (instructions, memories):
            tokens = part.locator("summary .part-tokens").inner_text()
            assert int(tokens.split()[0].replace(",", "")) > 0, tokens
            part.locator("summary").click()
        text = instructions.locator("pre").inner_text()
        assert f"Orchard {size}" in text and "Name every apple <variety> you mention." in text
        text = memories.locator("pre").inner_text()
        assert f"The orchard ({size}) has forty trees." in text and "Pick in October." in text
        # The panel's text is what /context reports.
        parts = {p["kind"]: p for p in api.get(f"/api/session/{chat['id']}/context")[1]["parts"]}
        assert parts["memories"]["text"].strip() == text.strip()
        instructions.scroll_into_view_if_needed()
        shot(page, f"context-panel-project-{size}-{scheme}")
        assert serious(page) == []
        assert page.errors == []
    finally:
        api.call("PATCH", "/api/preferences", {"memory": False})


def choose(row, label: str) -> None:
    value = row.locator("option", has_text=label).first.get_attribute("value")
    row.select_option(value)


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_the_fallback_editor_in_chat_settings_and_settings(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(api, scripted, model="main-model")
    endpoint_id = chat["endpoint"]["id"]
    # The endpoint lists some models to choose from.
    refresh_models(api, scripted, endpoint_id, ("main-model", "backup-a", "backup-b"))
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.locator(".chat-settings > summary").click()
    editor = page.locator("#chat-fallbacks")
    editor.wait_for()
    editor.get_by_role("button", name="Add fallback").click()
    page.locator("#chat-fallbacks select").first.wait_for()
    choose(page.locator("#chat-fallbacks select").nth(0), "backup-a")
    page.locator("#chat-fallbacks").get_by_role("button", name="Add fallback").click()
    page.locator("#chat-fallbacks select").nth(1).wait_for()
    choose(page.locator("#chat-fallbacks select").nth(1), "backup-b")
    # Reorder: backup-b first.
    page.get_by_role("button", name="Move fallback 2 up").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#chat-fallbacks select')[0].value.endsWith(':backup-b')"
    )
    # A row names its endpoint as well as its model (the closed select shows one line).
    first_row = page.locator("#chat-fallbacks select").first
    assert first_row.evaluate("s => s.selectedOptions[0].text") == (
        f"backup-b · {chat['endpoint']['name']}"
    )
    page.locator("#chat-fallbacks").scroll_into_view_if_needed()
    shot(page, f"fallbacks-chat-{size}-{scheme}")
    assert serious(page) == []
    page.locator(".chat-settings .settings-buttons button.primary").click()
    page.locator(".chat-settings .saved").wait_for()
    stored = api.get(f"/api/session/{chat['id']}")[1]["settings"]["fallbacks"]
    assert stored == [
        {"endpoint_id": endpoint_id, "model": "backup-b"},
        {"endpoint_id": endpoint_id, "model": "backup-a"},
    ]
    # Choosing the chat's own model is refused with its code, and nothing changes.
    page.get_by_role("button", name="Remove fallback 1").click()
    page.wait_for_function("() => document.querySelectorAll('#chat-fallbacks select').length === 1")
    choose(page.locator("#chat-fallbacks select").nth(0), "main-model")
    page.locator(".chat-settings .settings-buttons button.primary").click()
    page.get_by_text("is the chat's own model").wait_for()
    assert api.get(f"/api/session/{chat['id']}")[1]["settings"]["fallbacks"] == stored

    # Settings: the default chain.
    page.goto("/settings/endpoints#fallbacks")
    section = page.locator("#settings-fallbacks")
    section.get_by_role("button", name="Add fallback").click()
    page.locator("#settings-fallbacks select").first.wait_for()
    choose(page.locator("#settings-fallbacks select").first, "backup-a")
    page.locator("#settings-fallbacks").get_by_role("button", name="Save fallbacks").click()
    page.locator("#settings-fallbacks .saved").wait_for()
    try:
        assert api.get("/api/fallbacks")[1]["fallbacks"] == [
            {"endpoint_id": endpoint_id, "model": "backup-a"}
        ]
        page.locator("#settings-fallbacks").scroll_into_view_if_needed()
        shot(page, f"fallbacks-settings-{size}-{scheme}")
        assert serious(page) == []
    finally:
        api.call("PUT", "/api/fallbacks", {"fallbacks": []})
    errors = [e for e in page.errors if "400" not in e]  # the refused save above
    assert errors == []


def test_a_fallback_answer_says_so_in_the_transcript(open_page_on, site, api, scripted, shot):
    chat = make_chat(api, scripted, model="main-model")
    api.call(
        "PATCH",
        f"/api/session/{chat['id']}",
        {"settings": {"fallbacks": [{"endpoint_id": chat["endpoint"]["id"], "model": "backup-a"}]}},
    )
    page = open_page_on(site, "desktop", "light", f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    scripted.enqueue(Scenario.http_error(529, retry_after=0), model="main-model")
    scripted.enqueue(Scenario().text("Backup speaking."), model="backup-a")
    page.fill("#composer-input", "Hello?")
    page.press("#composer-input", "Enter")
    notice = page.locator(".fallback-notice")
    notice.wait_for()
    assert notice.inner_text() == (
        "Answered by backup-a on scripted-openai_chat: main-model returned 529"
    )
    shot(page, "fallback-notice")
