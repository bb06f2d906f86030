"""Real headless Chromium: attach a file with the picker and send it; compact by button."""

from __future__ import annotations

import json
import sqlite3

import pytest

from numi.testing import Scenario
from turn_support import Api, db_rows, make_chat, turn_server_env
from server_wait import WAIT_SECONDS


pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def test_attach_with_the_picker_and_send(browser_page, scripted, server, tmp_path):
    api = Api(server.url)
    chat = make_chat(api, scripted)
    notes = tmp_path / "notes <b>.txt"
    notes.write_text("The launch code is PINEAPPLE-7.\n")
    page = browser_page(server)
    page.goto(f"{server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.set_input_files("#composer-file", str(notes))
    page.wait_for_selector("#composer-attachments .attachment-chip[data-attachment-id]")
    assert page.locator("#composer-attachments .attachment-name").inner_text() == "notes <b>.txt"
    page.fill("#composer-input", "What is the code?")
    page.press("#composer-input", "Enter")
    scripted.wait_for_requests(1, timeout=WAIT_SECONDS)
    page.wait_for_selector(".msg-user .msg-attachments .attachment-chip")
    chip = page.locator(".msg-user .msg-attachments .attachment-name").first
    assert chip.inner_text() == "notes <b>.txt"
    assert page.locator("#composer-attachments .attachment-chip").count() == 0, (
        "chips clear after sending"
    )
    content = json.dumps(scripted.requests[0].body["messages"][-1]["content"])
    assert "PINEAPPLE-7" in content and "What is the code?" in content
    href = chip.get_attribute("href")
    response = page.request.get(server.url + href)
    assert response.status == 200 and b"PINEAPPLE-7" in response.body()
    assert not page.console_errors, page.console_errors


def test_compact_by_button_shows_the_divider(browser_page, scripted, server):
    api = Api(server.url)
    chat = make_chat(api, scripted)
    path = server.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as connection:
        for n in range(4):
            for role, text in (("user", f"question {n}"), ("assistant", f"answer {n}")):
                connection.execute(
                    "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, CURRENT_TIMESTAMP)",
                    (chat["id"], role, text),
                )
    scripted.enqueue(Scenario().text("We discussed **four** questions.", chunks=2))
    page = browser_page(server)
    page.goto(f"{server.url}/c/{chat['id']}")
    page.click("#context-gauge .gauge-button")  # the ring opens the panel, Compact is there
    page.click("#compact-button")
    page.wait_for_selector(".checkpoint-divider", timeout=WAIT_SECONDS * 1000)
    divider = page.locator(".checkpoint-divider")
    assert "Earlier messages summarised" in divider.locator("summary").inner_text()
    assert not page.locator(".checkpoint-summary").is_visible()
    divider.locator("summary").click()
    assert page.locator(".checkpoint-summary strong").inner_text() == "four"
    assert (
        db_rows(server, "SELECT COUNT(*) FROM checkpoints WHERE chat_id = ?", chat["id"])[0][0] == 1
    )
    assert page.locator(".msg-user").count() == 4, "the transcript stays whole"
    assert not page.console_errors, page.console_errors
