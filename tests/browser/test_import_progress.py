"""Real Chromium: Settings → Import uploads a file and follows its background job (issue 34):
the progress page shows how far the import got and opens the chat when it is done; a
refused file shows its message and code. At desktop and phone sizes."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from numi.testing.exports import chatgpt_chain

pytestmark = pytest.mark.browser

# Long enough that the progress page is seen while the job still writes.
CHATS, DEPTH = 2, 2_000


def _chatgpt_export() -> list:
    """Conversations of a chain of DEPTH messages each, with markup in titles and text."""
    return [
        chatgpt_chain(DEPTH, f"Imported {c} <script>x</script>", "Line {i} <b>bold?</b>")[0]
        for c in range(CHATS)
    ]


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_import_page_shows_progress_then_opens_the_chat(
    live_server, open_page_on, shot, tmp_path, size
):
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(_chatgpt_export()))
    page = open_page_on(live_server, size, "light", "/settings/import")
    page.set_input_files("form.import-form input[type=file]", str(export))
    # First what the file holds, under the form, with nothing written; then the import.
    page.get_by_role("button", name="Preview", exact=True).click()
    preview = page.locator("#import-preview .import-preview")
    expect(preview).to_have_text(
        "2 chats, 4000 messages from ChatGPT (conversations.json). Nothing was written yet.",
        timeout=60_000,
    )
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, f"import-preview-{size}", full_page=True)
    assert page.url.endswith("/settings/import")
    page.get_by_role("button", name="Import 2 chats", exact=True).click()
    page.wait_for_url(re.compile(r"/imports/\d+$"))
    progress = page.locator(".import-progress")
    # The poll swaps the part in place: "n of N messages written" while the job writes.
    page.wait_for_function(
        "() => /Importing: [1-9][0-9]* of 4000 messages written/"
        ".test(document.querySelector('.import-progress')?.textContent || '')",
        timeout=60_000,
    )
    assert progress.locator("progress").is_visible()
    assert "Nothing appears in your chats until the whole file is in" in progress.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, f"import-progress-{size}")
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]+$"), timeout=120_000)
    assert "Imported" in page.title() or page.locator("#transcript").count() == 1
    assert page.locator("#transcript").inner_text().count("<b>bold?</b>") >= 1
    assert page.errors == []


def test_a_refused_file_shows_its_reason(live_server, open_page_on, shot, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "numi.chat", "version": 1, "chat": {}, "messages": "<img>"}')
    page = open_page_on(live_server, "phone", "dark", "/settings/import")
    page.set_input_files("form.import-form input[type=file]", str(bad))
    page.click("form.import-form button[value=import]")
    page.wait_for_url(re.compile(r"/imports/\d+$"))
    page.wait_for_function(
        "() => document.querySelector('.import-progress [role=alert]') !== null", timeout=60_000
    )
    text = page.locator(".import-progress").inner_text()
    assert "messages must be a list" in text and "invalid_import" in text
    assert "Nothing was imported" in text
    shot(page, "import-refused-phone")
    assert page.errors == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_preview_lists_the_conversations_it_cannot_read_and_why(
    live_server, open_page_on, shot, tmp_path, size
):
    """Issue 42: "3 unreadable, with why" before anything is written; the file's titles
    and the reasons shown as text, a long one wrapping on a phone."""
    hostile = '<img src=x onerror="document.title=1">' + "Quarterly tax notes " * 6
    chats = [chatgpt_chain(2, f"Readable {n}")[0] for n in range(3)]
    for n, chat in enumerate(chats):
        chat["conversation_id"] = f"conv-{n}"
    chats[1] = {"title": hostile, "mapping": "not a tree"}
    chats.append({"title": "Cut", "mapping": {}, "current_node": "gone"})
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(chats))
    page = open_page_on(live_server, size, "light", "/settings/import")
    page.set_input_files("form.import-form input[type=file]", str(export))
    page.get_by_role("button", name="Preview", exact=True).click()
    preview = page.locator("#import-preview .import-preview")
    expect(preview).to_have_text(
        "2 chats, 4 messages from ChatGPT (conversations.json); 2 unreadable, left out. "
        "Nothing was written yet.",
        timeout=60_000,
    )
    listed = page.locator("#import-preview .import-unreadable li")
    expect(listed).to_have_count(2)
    assert listed.nth(0).inner_text() == (
        f"{hostile.strip()}: conversations[1].mapping must be an object of message nodes."
    )
    assert listed.nth(1).inner_text().startswith("Cut: conversations[3].")
    assert page.locator("#import-preview img").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    expect(page.get_by_role("button", name="Import 2 chats", exact=True)).to_be_visible()
    shot(page, f"import-unreadable-{size}", full_page=True)
    assert page.errors == []
