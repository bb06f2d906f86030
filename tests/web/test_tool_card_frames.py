"""Tool cards over the HTML WebSocket (issue 25, item 9): a finished card keeps the arguments
it was called with, as the saved card shows them after a reload; a call the user refused
reads "Denied" (from the live event and from a late client's snapshot), one that waited in
vain "Not run", never "failed". Live server, scripted provider through the real SDK, real
WebSocket clients."""

from __future__ import annotations

import re
import urllib.request

import pytest

from numi.testing import Scenario

from turn_support import Api, Socket, make_chat, turn_server_env


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_APPROVAL_TIMEOUT_SECONDS="60"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def hasty_server(live_server_factory):
    """Approvals lapse at once."""
    started = live_server_factory(**turn_server_env(NUMI_APPROVAL_TIMEOUT_SECONDS="0.2"))
    yield started
    started.stop()


def frames_until(ws, needle: str) -> str:
    seen = ""
    while needle not in seen:
        seen += ws.receive(timeout=30)
    return seen


def card(html: str, status: str) -> str:
    found = re.search(
        rf'<details id="tool-[^"]+" class="tool-card tool-{status}".*?</details>', html, re.S
    )
    assert found, f"no {status} card"
    return found.group(0)


def page(server, chat_id: str) -> str:
    request = urllib.request.Request(
        f"{server.url}/c/{chat_id}", headers={"Authorization": f"Bearer {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def test_finished_and_denied_cards_keep_their_arguments(server, scripted):
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted, settings={"tools": ["guarded", "echo"]})
    scripted.enqueue(
        Scenario()
        .tool_call("echo", {"said": "ran-with-these"})
        .tool_call("guarded", {"label": "refuse-me"})
    )
    scripted.enqueue(Scenario().text("After the tools", chunks=1).stall())
    ws = Socket(server, chat["id"], html=True)
    try:
        ws.send(type="resume", last_event_id=None, last_message_id=0)
        ws.send(type="send", message="Use both")
        asked = frames_until(ws, "needs your approval")
        call_id = re.search(
            r'"call_id": "([^"]+)", "decision": "deny"', asked.replace("&#34;", '"')
        )
        ws.send(type="approve", call_id=call_id.group(1), decision="deny")
        ended = frames_until(ws, "tool-denied")
        done = card(asked + ended, "done")
        assert "ran-with-these" in done and "Arguments" in done
        denied = card(ended, "denied")
        assert "Denied" in denied and "failed" not in denied and "refuse-me" in denied
        assert " ms<" not in denied  # how long the user took is not the tool's duration
        frames_until(ws, "After the tools")
        # A client that comes now gets the cards from the snapshot: the same words.
        late = Socket(server, chat["id"], html=True)
        try:
            late.send(type="resume", last_event_id=None, last_message_id=0)
            snapshot = frames_until(late, "tool-denied")
        finally:
            late.close()
        assert "Denied" in card(snapshot, "denied") and "refuse-me" in card(snapshot, "denied")
    finally:
        scripted.release()
        frames_until(ws, 'data-running="0"')
        ws.close()
    # After a reload: the same cards, word for word.
    reloaded = page(server, chat["id"])
    assert text(card(reloaded, "done")) == text(done)
    assert text(card(reloaded, "denied")) == text(denied)


def test_an_approval_nobody_gave_reads_not_run(hasty_server, scripted):
    api = Api(hasty_server.url, token=hasty_server.token)
    chat = make_chat(api, scripted, settings={"tools": ["guarded"]})
    scripted.enqueue(Scenario().tool_call("guarded", {"label": "waited"}))
    scripted.enqueue(Scenario().text("Nobody answered."))
    ws = Socket(hasty_server, chat["id"], html=True)
    try:
        ws.send(type="resume", last_event_id=None, last_message_id=0)
        ws.send(type="send", message="Ask me")
        expired = card(frames_until(ws, "tool-expired"), "expired")
        frames_until(ws, 'data-running="0"')
    finally:
        ws.close()
    assert "Not run: no answer in time" in expired and "failed" not in expired
    assert text(card(page(hasty_server, chat["id"]), "expired")) == text(expired)


def folded(html: str) -> list[str]:
    """The text of each folded run of tool steps (partials/_tool_steps.html)."""
    return [
        text(found)
        for found in re.findall(
            r'<details class="tool-group".*?</details>\s*</details>', html, re.S
        )
    ]


def test_a_run_of_finished_steps_folds_alike_live_and_reloaded(server, scripted):
    """Three finished calls of one tool fold under one line, pushed when the step's results
    are saved; the refused call after them stands alone; the reloaded page draws the same."""
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted, settings={"tools": ["guarded", "echo"]})
    scripted.enqueue(
        Scenario()
        .tool_call("echo", {"said": "one"})
        .tool_call("echo", {"said": "two"})
        .tool_call("echo", {"said": "<b>three</b>"})
        .tool_call("guarded", {"label": "refuse-me"})
    )
    scripted.enqueue(Scenario().text("Folded, then answered."))
    ws = Socket(server, chat["id"], html=True)
    try:
        ws.send(type="resume", last_event_id=None, last_message_id=0)
        ws.send(type="send", message="Use them all")
        asked = frames_until(ws, "needs your approval")
        assert 'class="tool-group"' not in asked  # nothing folds while a call waits
        call_id = re.search(
            r'"call_id": "([^"]+)", "decision": "deny"', asked.replace("&#34;", '"')
        )
        ws.send(type="approve", call_id=call_id.group(1), decision="deny")
        live = frames_until(ws, "Folded, then answered.")
        frames_until(ws, 'data-running="0"')
    finally:
        ws.close()
    steps = re.search(r'<div id="steps-\d+" class="tool-steps" hx-swap-oob="true">', live)
    assert steps, "the finished step was not pushed in its folded shape"
    (line,) = folded(live)
    assert line.startswith("Used echo 3 times")
    assert "&lt;b&gt;three&lt;/b&gt;" in live and "<b>three</b>" not in live
    assert "Denied" not in line and "Denied" in card(live, "denied")
    reloaded = page(server, chat["id"])
    assert folded(reloaded) == [line]
    assert text(card(reloaded, "denied")) == text(card(live, "denied"))
