"""Every failed tool result is saved with ok: false and a stable error code in its meta,
also when the tool reports the failure itself (a refused address, a path outside the
workspace, a command that exited non-zero). Live server, scripted provider, real tools."""

from __future__ import annotations

from numi.testing import Scenario

from turn_support import make_chat, of_type
from server_wait import WAIT_SECONDS


def test_failed_tool_results_carry_ok_false_and_a_code(api, scripted, sockets, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("hello")
    chat = make_chat(
        api,
        scripted,
        settings={
            "tools": ["bash", "read_file", "fetch_page", "echo"],
            "workspace": str(workspace),
            "auto_approve": True,
        },
    )
    scripted.enqueue(
        Scenario()
        .tool_call("bash", {"command": "echo out; exit 3"})
        .tool_call("read_file", {"path": "../../etc/passwd"})
        .tool_call("fetch_page", {"url": "http://127.0.0.1:9/private"})
        .tool_call("no_such_tool", {})
        .tool_call("read_file", {"path": "notes.md"})
        .tool_call("echo", {"fine": True})
    )
    scripted.enqueue(Scenario().text("Reported."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Try the tools")
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)

    results = [m for m in api.history(chat["id"]) if m["role"] == "tool"]
    outcome = [(m["meta"]["tool"], m["meta"]["ok"], m["meta"].get("error_code")) for m in results]
    assert outcome == [
        ("bash", False, "exit_status"),
        ("read_file", False, "outside_workspace"),
        ("fetch_page", False, "address_refused"),
        ("no_such_tool", False, "unknown_tool"),
        ("read_file", True, None),
        ("echo", True, None),
    ]
    assert "out" in results[0]["content"] and "exit code 3" in results[0]["content"], (
        "the model still reads the output"
    )
    ends = {e["data"]["name"]: e["data"] for e in of_type(events, "tool_end")}
    assert ends["bash"]["ok"] is False and ends["bash"]["error_code"] == "exit_status"
    assert ends["echo"]["ok"] is True and "error_code" not in ends["echo"]
