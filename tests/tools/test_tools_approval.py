"""Tool approvals through a live server: every call gets its own Numi id, an approval is
bound to the digest of the call shown on its card, nothing runs that no card showed, and the
per-tool policy (`ask` / `auto`) decides which calls wait for the user."""

from __future__ import annotations

import re

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_APPROVAL_TIMEOUT_SECONDS="20"))
    yield started
    started.stop()


def tool_chat(server, scripted, workspace, tools, **settings):
    return make_chat(
        Api(server.url),
        scripted,
        settings={"tools": tools, "workspace": str(workspace), **settings},
    )


def approvals_until(socket, count):
    """Events up to the `count`-th tool_approval."""
    events = []
    while len(of_type(events, "tool_approval")) < count:
        events += socket.events_until("tool_approval")
    return events


def test_two_calls_sharing_a_provider_id_need_two_approvals(server, scripted, tmp_path):
    """The attack: two bash calls with one provider id. Approving the card that shows `ls`
    must not run the `touch` the user never approved."""
    chat = tool_chat(server, scripted, tmp_path, ["bash"])
    scripted.enqueue(
        Scenario()
        .tool_call("bash", {"command": "ls"}, id="call_dup")
        .tool_call("bash", {"command": "touch pwned"}, id="call_dup")
    )
    scripted.enqueue(Scenario().text("Done."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="look around")
        events = approvals_until(socket, 2)
        cards = [e["data"] for e in of_type(events, "tool_approval")]
        assert len({card["call_id"] for card in cards}) == 2, "one card (and one approval) per call"
        assert "call_dup" not in {card["call_id"] for card in cards}, (
            "Numi's ids, not the provider's"
        )
        ls = next(card for card in cards if card["arguments"] == {"command": "ls"})
        touch = next(card for card in cards if card["arguments"] == {"command": "touch pwned"})
        socket.send(type="approve", call_id=ls["call_id"], digest=ls["digest"], decision="approve")
        events += socket.events_until("tool_end")
        assert of_type(events, "tool_end")[0]["data"]["call_id"] == ls["call_id"]
        assert not (tmp_path / "pwned").exists(), "approving `ls` ran the hidden command"
        socket.send(type="approve", call_id=touch["call_id"], decision="deny")
        events += socket.events_until("turn_end")
    finally:
        socket.close()
    assert not (tmp_path / "pwned").exists()
    ends = {e["data"]["call_id"]: e["data"] for e in of_type(events, "tool_end")}
    assert (
        ends[ls["call_id"]]["ok"]
        and ends[touch["call_id"]]["result"] == "The user denied this call."
    )
    # The provider gets its own ids back (it pairs calls and results by them).
    body = scripted.requests[-1].body
    [assistant] = [m for m in body["messages"] if m.get("tool_calls")]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_dup", "call_dup"]
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["call_dup", "call_dup"]
    assert results[1]["content"] == "The user denied this call."


def test_an_approval_for_other_arguments_runs_nothing(server, scripted, tmp_path):
    chat = tool_chat(server, scripted, tmp_path, ["bash"])
    scripted.enqueue(Scenario().tool_call("bash", {"command": "touch pwned"}))
    scripted.enqueue(Scenario().text("Done."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="go")
        [card] = [e["data"] for e in of_type(approvals_until(socket, 1), "tool_approval")]
        # An approval without the digest of what the card showed, or with another one, is refused.
        for digest in (None, "0" * 64):
            socket.send(
                type="approve",
                call_id=card["call_id"],
                decision="approve",
                **({"digest": digest} if digest else {}),
            )
            [error] = of_type(socket.events_until("error"), "error")
            assert error["data"]["code"] == "approval_mismatch"
        assert not (tmp_path / "pwned").exists()
        socket.send(type="approve", call_id=card["call_id"], decision="deny")
        events = socket.events_until("turn_end")
    finally:
        socket.close()
    assert not of_type(events, "tool_start") and not (tmp_path / "pwned").exists()


def test_html_cards_use_numi_ids_and_carry_the_digest(server, scripted, tmp_path):
    chat = tool_chat(server, scripted, tmp_path, ["bash"])
    scripted.enqueue(
        Scenario()
        .tool_call("bash", {"command": "ls"}, id="call_dup")
        .tool_call("bash", {"command": "touch pwned"}, id="call_dup")
    )
    socket = Socket(server, chat["id"], html=True)
    try:
        socket.send(type="send", message="go")
        page = ""
        while page.count(">Approve</button>") < 2:
            page += socket.receive()
    finally:
        socket.close()
        Api(server.url).post(f"/api/chat/stop/{chat['id']}")
    card_ids = set(re.findall(r'id="tool-([^"]+)"', page))
    assert len(card_ids) == 2 and "call_dup" not in card_ids
    assert page.count("&#34;digest&#34;") + page.count('"digest"') >= 2, (
        "each Approve button sends its card's digest"
    )


def test_write_file_and_patch_file_ask_first_by_default(server, scripted, tmp_path):
    (tmp_path / "notes.txt").write_text("old text\n")
    chat = tool_chat(server, scripted, tmp_path, ["write_file", "patch_file"])
    scripted.enqueue(
        Scenario()
        .tool_call("write_file", {"path": "new.txt", "content": "pwned"})
        .tool_call("patch_file", {"path": "notes.txt", "old_string": "old", "new_string": "pwned"})
    )
    scripted.enqueue(Scenario().text("Done."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="edit")
        cards = [e["data"] for e in of_type(approvals_until(socket, 2), "tool_approval")]
        assert sorted(card["name"] for card in cards) == ["patch_file", "write_file"]
        assert (
            not (tmp_path / "new.txt").exists()
            and (tmp_path / "notes.txt").read_text() == "old text\n"
        )
        for card in cards:
            socket.send(type="approve", call_id=card["call_id"], decision="deny")
        socket.events_until("turn_end")
    finally:
        socket.close()
    assert (
        not (tmp_path / "new.txt").exists() and (tmp_path / "notes.txt").read_text() == "old text\n"
    )


def test_auto_policy_runs_without_asking_and_ask_overrides_auto_approve(server, scripted, tmp_path):
    api = Api(server.url)
    chat = tool_chat(
        server,
        scripted,
        tmp_path,
        ["write_file", "bash"],
        auto_approve=True,
        tool_policy={"write_file": "auto", "bash": "ask"},
    )
    status, saved = api.get(f"/api/session/{chat['id']}")
    assert saved["settings"]["tool_policy"] == {"write_file": "auto", "bash": "ask"}
    scripted.enqueue(
        Scenario()
        .tool_call("write_file", {"path": "new.txt", "content": "written"})
        .tool_call("bash", {"command": "touch ran"})
    )
    scripted.enqueue(Scenario().text("Done."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="go")
        events = approvals_until(socket, 1)
        [card] = [e["data"] for e in of_type(events, "tool_approval")]
        assert card["name"] == "bash", "bash is set to ask, even with auto-approve on"
        socket.send(type="approve", call_id=card["call_id"], decision="deny")
        events += socket.events_until("turn_end")
    finally:
        socket.close()
    assert (tmp_path / "new.txt").read_text() == "written" and not (tmp_path / "ran").exists()
    assert len(of_type(events, "tool_approval")) == 1


def test_tool_policy_is_validated(server, scripted, tmp_path):
    api = Api(server.url)
    chat = tool_chat(server, scripted, tmp_path, ["bash"])
    for bad in ({"bash": "always"}, ["bash"], {"x" * 100: "ask"}):
        status, body = api.call(
            "PATCH", f"/api/session/{chat['id']}", {"settings": {"tool_policy": bad}}
        )
        assert status == 400 and body["error"]["code"] == "invalid_input", body
    status, saved = api.get(f"/api/session/{chat['id']}")
    assert "tool_policy" not in saved["settings"]


def test_settings_form_sets_the_policy_per_tool(sqlite_client, tmp_path):
    workspace = tmp_path / "ws"  # beside the app's data directory (tmp_path/data), not around it
    workspace.mkdir()
    chat = sqlite_client.post("/api/session", json={}).json
    page = sqlite_client.get(f"/c/{chat['id']}").get_data(as_text=True)
    assert 'name="policy_bash"' in page and 'name="policy_write_file"' in page
    response = sqlite_client.post(
        f"/c/{chat['id']}/settings",
        headers={"HX-Request": "true"},
        data={
            "tools_shown": "1",
            "tools": ["bash", "write_file"],
            "policy_write_file": "auto",
            "policy_bash": "",
            "workspace": str(workspace),
        },
    )
    assert response.status_code == 200
    assert '<option value="auto" selected>' in response.get_data(as_text=True)
    settings = sqlite_client.get(f"/api/session/{chat['id']}").json["settings"]
    assert settings["tool_policy"] == {"write_file": "auto"}, (
        "a tool left on its default stores nothing"
    )
    response = sqlite_client.post(
        f"/c/{chat['id']}/settings", data={"tools_shown": "1", "policy_bash": "never"}
    )
    assert response.status_code == 400
    assert sqlite_client.get(f"/api/session/{chat['id']}").json["settings"]["tool_policy"] == {
        "write_file": "auto"
    }
