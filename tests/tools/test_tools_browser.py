"""Real headless Chromium: a bash approval survives a reload, Approve runs the command."""

from __future__ import annotations


import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, turn_server_env
from server_wait import WAIT_SECONDS


pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def approval_server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_APPROVAL_TIMEOUT_SECONDS="60"))
    yield started
    started.stop()


def open_chat(browser_page, server, chat):
    page = browser_page(server)
    page.goto(f"{server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    return page


@pytest.mark.parametrize("decision", ["Approve", "Deny"])
def test_approval_survives_reload(browser_page, scripted, approval_server, tmp_path, decision):
    command = "echo '<b>made</b>' > made.txt && cat made.txt"
    chat = make_chat(
        Api(approval_server.url), scripted, settings={"tools": ["bash"], "workspace": str(tmp_path)}
    )
    scripted.enqueue(Scenario().tool_call("bash", {"command": command}, id="call_bash"))
    scripted.enqueue(Scenario().text("All **done**."))
    page = open_chat(browser_page, approval_server, chat)
    page.fill("#composer-input", "Make the file")
    page.press("#composer-input", "Enter")
    card = page.locator(".tool-card.tool-approval")
    card.locator("button", has_text="Approve").wait_for()
    assert card.locator(".tool-command").inner_text() == command
    card_id = card.get_attribute("id")
    assert card_id.startswith("tool-nc_"), "the card is named by Numi's id, not the provider's"

    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    card = page.locator(f"#{card_id}")
    card.locator("button", has_text=decision).wait_for(timeout=WAIT_SECONDS * 1000)
    assert card.locator(".tool-command").inner_text() == command, (
        "the command is shown again after a reload"
    )
    assert not (tmp_path / "made.txt").exists()

    card.locator("button", has_text=decision).click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.msg-assistant .msg-body')]"
        ".some(b => b.textContent.includes('All done.'))",
        timeout=WAIT_SECONDS * 1000,
    )
    result = page.locator(f"#{card_id} .tool-output").text_content().strip()
    if decision == "Approve":
        assert "<b>made</b>" in result and (tmp_path / "made.txt").exists()
    else:
        assert result == "The user denied this call." and not (tmp_path / "made.txt").exists()
    assert page.locator(f"#{card_id} button").count() == 0
    assert page.locator("b", has_text="made").count() == 0, "tool output is text, not markup"
    assert not page.console_errors, page.console_errors
    page.close()
