"""Real headless Chromium, desktop and phone (light and dark): the context panel marks what
the privacy gateway will replace before the request leaves, and the endpoint's Edit form
shows its privacy settings (issue 41); a mark pressed goes out as it is in the next send
only; attached files' text is marked too, and each part says whether the prompt cache
serves it. axe-core finds no serious problem; screenshots are
saved under tmp_path."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import send
from turn_support import Socket, make_chat, run_turn, upload_attachment

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]
IDS = [f"{size}-{scheme}" for size, scheme in LOOKS]


def serious(page, region: str) -> list[str]:
    from page_support import serious_violations

    return serious_violations(page, region)


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_the_panel_marks_what_will_be_replaced_and_the_form_sets_it(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(
        api,
        scripted,
        name=f"private-{size}",
        settings={
            "system_prompt": "Reply to jane.roe@example.com <politely>, card 4111 1111 1111 1111."
        },
    )
    endpoint = chat["endpoint"]["id"]
    status, _ = api.call("PATCH", f"/api/endpoints/{endpoint}", {"redaction": {"enabled": True}})
    assert status == 200
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.locator("#context-gauge .gauge-button").click()
    panel = page.locator("#context-panel")
    note = panel.locator("#context-redaction")
    note.wait_for()
    assert (
        "2 items will be replaced before the request leaves (card 1, email 1)" in note.inner_text()
    )
    part = panel.locator(".context-part[data-kind=system_prompt]")
    assert "2 to replace" in part.locator("summary").inner_text()
    part.locator("summary").click()
    marks = part.locator("mark.redact")
    assert marks.evaluate_all("m => m.map(x => [x.dataset.label, x.textContent])") == [
        ["EMAIL", "jane.roe@example.com"],
        ["CARD", "4111 1111 1111 1111"],
    ]
    assert "<politely>" in part.locator("pre").inner_text()
    shot(page, f"privacy-panel-{size}-{scheme}", both_themes=True)
    assert serious(page, "#context-panel") == []

    page.goto(f"{site.url}/settings/endpoints")
    page.locator(f"#endpoint-{endpoint} a", has_text="Edit").click()
    privacy = page.locator(f"#endpoint-{endpoint}-privacy")
    privacy.wait_for()
    privacy.locator("textarea[name=redaction_words]").fill("CLIENT: Jane Roe")
    privacy.scroll_into_view_if_needed()
    shot(page, f"privacy-form-{size}-{scheme}")
    assert serious(page, f"#endpoint-{endpoint}") == []
    page.locator(f"#endpoint-{endpoint} button[type=submit]").click()
    page.locator(f"#endpoint-{endpoint} .endpoint-status").wait_for()
    assert "redacts" in page.locator(f"#endpoint-{endpoint}").inner_text()
    _, listed = api.get("/api/endpoints")
    (saved,) = [e for e in listed["endpoints"] if e["id"] == endpoint]
    assert saved["redaction"]["words"] == [{"text": "Jane Roe", "label": "CLIENT"}]
    assert page.errors == []


def request_with(scripted, question: str) -> str:
    """The answer's request that carried `question` (not a title's), as sent."""
    bodies = [json.dumps(r.body) for r in scripted.requests]
    [body] = [b for b in bodies if question in b and "Our support address is" in b]
    return body


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_a_mark_pressed_in_the_panel_goes_out_as_is_in_the_next_send_only(
    open_page_on, site, api, scripted, shot, size, scheme
):
    support = f"help-{size}@example.org"
    chat = make_chat(
        api,
        scripted,
        name=f"exempt-{size}",
        settings={
            "system_prompt": f"Our support address is {support}; yours is jane.roe@example.com."
        },
    )
    endpoint = chat["endpoint"]["id"]
    assert (
        api.call("PATCH", f"/api/endpoints/{endpoint}", {"redaction": {"enabled": True}})[0] == 200
    )
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.locator("#context-gauge .gauge-button").click()
    part = page.locator("#context-panel .context-part[data-kind=system_prompt]")
    part.locator("summary").click()
    toggle = part.locator(".redact-exempt", has_text=support)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(part.locator("mark.redact:has(> [aria-pressed=true])")).to_have_count(1)
    shot(page, f"privacy-exempt-{size}-{scheme}")
    assert serious(page, "#context-panel") == []
    if size == "phone":
        page.locator("#context-panel-close").click()  # the panel covers the composer

    scripted.enqueue(Scenario().text("Noted."), Scenario().text("Again."))
    send(page, "Who do I write to?")
    expect(page.locator(".msg-assistant .msg-body", has_text="Noted.")).to_be_visible()
    first = request_with(scripted, "Who do I write to?")
    assert support in first and "jane.roe@example.com" not in first
    send(page, "And after that?")
    expect(page.locator(".msg-assistant .msg-body", has_text="Again.")).to_be_visible()
    second = request_with(scripted, "And after that?")
    assert support not in second and "jane.roe@example.com" not in second  # once only
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_the_panel_marks_an_attached_files_text(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(api, scripted, name=f"attached-{size}")
    endpoint = chat["endpoint"]["id"]
    assert (
        api.call("PATCH", f"/api/endpoints/{endpoint}", {"redaction": {"enabled": True}})[0] == 200
    )
    text = "Invoice\nPay DE89 3704 0044 0532 0130 00 by Friday.\nQuestions: billing@example.com\n"
    attachment = upload_attachment(site.url, "invoice.txt", text.encode(), "text/plain", site.token)
    scripted.enqueue(Scenario().text("Read."))
    ws = Socket(site, chat["id"])
    try:
        ws.send(type="send", message="Read this.", attachments=[attachment], request_id="att-b")
        ws.events_until("turn_end")
    finally:
        ws.close()
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.locator("#context-gauge .gauge-button").click()
    part = page.locator("#context-panel .context-part[data-kind=attachments]")
    expect(part.locator("summary")).to_contain_text("2 to replace")
    part.locator("summary").click()
    marks = part.locator(".context-file mark.redact")
    assert marks.evaluate_all("m => m.map(x => [x.dataset.label, x.textContent])") == [
        ["IBAN", "DE89 3704 0044 0532 0130 00"],
        ["EMAIL", "billing@example.com"],
    ]
    part.scroll_into_view_if_needed()
    shot(page, f"privacy-attachment-{size}-{scheme}")
    assert serious(page, "#context-panel") == []
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_the_panel_says_per_part_what_the_prompt_cache_serves(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(
        api,
        scripted,
        kind="anthropic",
        model="claude-cached",
        name=f"cached-{size}",
        settings={"system_prompt": "Be brief. " * 50},
    )
    for turn in (1, 2):
        scripted.enqueue(Scenario().text(f"Answer {turn}. " * 20).usage(None, 40))
        run_turn(site, chat["id"], f"Question {turn}?")
    [answer] = [m for m in api.history(chat["id"]) if m["role"] == "assistant"][-1:]
    cached = answer["meta"]["usage"]["cached_input_tokens"]
    assert cached > 0
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.locator("#context-gauge .gauge-button").click()
    expect(page.locator("#context-cache")).to_contain_text(f"read {cached:,} tokens from it")
    system = page.locator("#context-panel .context-part[data-kind=system_prompt] .part-cache")
    expect(system).to_have_attribute("data-expected", "true")
    expect(system).to_contain_text("read last time")
    shot(page.locator("#context-panel"), f"cache-parts-{size}-{scheme}")
    assert serious(page, "#context-panel") == []
    assert page.errors == []
