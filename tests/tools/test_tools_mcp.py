"""MCP servers built with the `mcp` SDK, called in full turns through a live Numi server.

Both transports: a Streamable HTTP server on loopback (a subprocess) and a stdio server (a
script the test writes, started by Numi). A destructive tool waits for approval over the
WebSocket; a read-only one runs at once; a stdio server sees none of Numi's environment.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest
from server_wait import wait_until_ready
from server_wait import WAIT_SECONDS


@pytest.fixture(autouse=True)
def _mcp_sdk(require_extra):
    require_extra("mcp", "mcp")  # the servers below are written with the MCP SDK


SERVER_SCRIPT = textwrap.dedent('''
    import os, sys
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("numi-test")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> str:
        """Add two whole numbers."""
        return f"sum={a + b}"

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def wipe(target: str) -> str:
        """Delete everything in target."""
        return f"wiped {target}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def getenv(name: str) -> str:
        """Read an environment variable of the server process."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def note(text: str) -> str:
        """Write a note (no annotations: the spec's default is "may be destructive")."""
        return "noted"

    if __name__ == "__main__":
        if sys.argv[1:2] == ["http"]:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        else:
            server.run("stdio")
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mcp_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "numi_test_mcp_server.py"
    path.write_text(SERVER_SCRIPT)
    return path


@pytest.fixture(scope="module")
def http_mcp(mcp_script):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(mcp_script), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def listening() -> bool:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True

    wait_until_ready(
        proc,
        listening,
        what="the MCP server",
        log=lambda: proc.stderr.read().decode() if proc.poll() is not None else "",
    )
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def mcp_server(live_server_factory):
    from turn_support import turn_server_env

    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def _turn(server, chat_id, message, *, approve: str | None = None):
    from turn_support import Socket, of_type

    ws = Socket(server, chat_id)
    try:
        ws.send(type="send", message=message)
        events = []
        if approve:
            events = ws.events_until("tool_approval", timeout=WAIT_SECONDS)
            card = of_type(events, "tool_approval")[0]["data"]
            ws.send(
                type="approve", call_id=card["call_id"], digest=card["digest"], decision=approve
            )
        events += ws.events_until("turn_end", timeout=WAIT_SECONDS)
        return events
    finally:
        ws.close()


def test_http_mcp_server_tools_in_a_full_turn_with_approval(mcp_server, scripted, http_mcp):
    from numi.testing import Scenario
    from turn_support import Api, make_chat, of_type

    api = Api(mcp_server.url)
    status, server = api.post(
        "/api/mcp_servers", {"name": "calc", "transport": "http", "url": http_mcp}
    )
    assert status == 201, server
    status, tested = api.post(f"/api/mcp_servers/{server['id']}/test")
    assert tested["ok"], tested
    tools = {t["name"]: t for t in tested["tools"]}
    assert tools["mcp__calc__add"]["needs_approval"] is False
    assert tools["mcp__calc__wipe"]["needs_approval"] is True, "destructiveHint asks first"
    assert tools["mcp__calc__note"]["needs_approval"] is True, (
        "a tool not marked read-only asks first"
    )

    chat = make_chat(api, scripted, settings={"tools": ["mcp__calc"]})
    scripted.enqueue(Scenario().tool_call("mcp__calc__add", {"a": 2, "b": 40}))
    scripted.enqueue(Scenario().text("It is 42."))
    events = _turn(mcp_server, chat["id"], "What is 2 + 40?")
    end = of_type(events, "tool_end")[0]["data"]
    assert end["ok"] and "sum=42" in end["result"], end
    assert not of_type(events, "tool_approval")
    sent = {t["function"]["name"]: t["function"] for t in scripted.requests[0].body["tools"]}
    assert {"mcp__calc__add", "mcp__calc__wipe", "mcp__calc__getenv"} <= set(sent)
    assert sent["mcp__calc__add"]["parameters"]["properties"]["a"]["type"] == "integer", (
        "the server's schema"
    )

    # The destructive tool waits for the user's approval over the WebSocket.
    scripted.enqueue(Scenario().tool_call("mcp__calc__wipe", {"target": "/tmp/nothing"}))
    scripted.enqueue(Scenario().text("Done."))
    events = _turn(mcp_server, chat["id"], "Wipe it", approve="approve")
    approval = of_type(events, "tool_approval")[0]["data"]
    assert approval["name"] == "mcp__calc__wipe" and approval["arguments"] == {
        "target": "/tmp/nothing"
    }
    end = of_type(events, "tool_end")[0]["data"]
    assert end["ok"] and "wiped /tmp/nothing" in end["result"]

    # Denied: the call does not reach the server; the model reads the denial.
    scripted.enqueue(Scenario().tool_call("mcp__calc__wipe", {"target": "/tmp/other"}))
    scripted.enqueue(Scenario().text("Not done."))
    events = _turn(mcp_server, chat["id"], "Wipe the other", approve="deny")
    end = of_type(events, "tool_end")[0]["data"]
    assert not end["ok"] and "denied" in end["result"]

    # Removed: its tools are gone from the next turn.
    assert api.call("DELETE", f"/api/mcp_servers/{server['id']}")[0] == 204
    scripted.enqueue(Scenario().text("No tools."))
    _turn(mcp_server, chat["id"], "Again")
    assert "tools" not in scripted.requests[-1].body or not any(
        t["function"]["name"].startswith("mcp__calc") for t in scripted.requests[-1].body["tools"]
    )


def test_stdio_mcp_server_in_a_full_turn_without_numi_secrets(mcp_server, scripted, mcp_script):
    from numi.testing import Scenario
    from turn_support import Api, make_chat, of_type

    api = Api(mcp_server.url)
    status, server = api.post(
        "/api/mcp_servers",
        {
            "name": "local",
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(mcp_script)],
            "always_approve": False,
        },
    )
    assert status == 201, server
    chat = make_chat(api, scripted, settings={"tools": ["mcp__local__add", "mcp__local__getenv"]})
    scripted.enqueue(
        Scenario()
        .tool_call("mcp__local__add", {"a": 1, "b": 1})
        .tool_call("mcp__local__getenv", {"name": "NUMI_DATA_DIR"})
    )
    scripted.enqueue(Scenario().text("Two."))
    events = _turn(mcp_server, chat["id"], "1 + 1?")
    ends = {e["data"]["name"]: e["data"] for e in of_type(events, "tool_end")}
    assert ends["mcp__local__add"]["ok"] and "sum=2" in ends["mcp__local__add"]["result"], ends
    assert ends["mcp__local__getenv"]["result"] == "<unset>", (
        "Numi's environment stays out of MCP servers"
    )
    names = {t["function"]["name"] for t in scripted.requests[0].body["tools"]}
    assert names == {"mcp__local__add", "mcp__local__getenv"}, "only the tools the chat turned on"


def test_mcp_server_settings_are_validated_and_owner_scoped(multi_app, client_a, client_b):
    ok = client_a.post("/api/mcp_servers", json={"name": "remote", "url": "http://mcp.invalid/mcp"})
    assert ok.status_code == 201
    server_id = ok.get_json()["id"]
    bad = [
        ({"name": "Bad Name!", "url": "http://mcp.invalid/mcp"}, "invalid_name"),
        ({"name": "x", "url": "ftp://example.invalid/"}, "invalid_url"),
        ({"name": "x", "transport": "carrier-pigeon"}, "invalid_transport"),
        ({"name": "remote", "url": "http://mcp.invalid/mcp"}, "duplicate_name"),
        ({"name": "prog", "transport": "stdio", "command": "rm"}, "forbidden"),  # not an admin
    ]
    for body, code in bad:
        response = client_a.post("/api/mcp_servers", json=body)
        assert (
            response.get_json()["error"]["code"] == code
            if "error" in response.get_json()
            else False
        ), (body, response.get_json())
    assert len(client_a.get("/api/mcp_servers").get_json()["servers"]) == 1
    # Another user sees none of it and cannot touch it.
    assert client_b.get("/api/mcp_servers").get_json()["servers"] == []
    assert client_b.delete(f"/api/mcp_servers/{server_id}").status_code == 404
    assert client_b.post(f"/api/mcp_servers/{server_id}/test").status_code == 404
    # An unreachable server: the test says so, nothing breaks.
    tested = client_a.post(f"/api/mcp_servers/{server_id}/test").get_json()
    assert tested["ok"] is False and "Could not connect" in tested["message"]
    page = client_a.get("/settings/mcp").get_data(as_text=True)
    assert "MCP servers" in page and "remote" in page
    assert client_a.delete(f"/api/mcp_servers/{server_id}").status_code == 204
    assert client_a.get("/api/mcp_servers").get_json()["servers"] == []


def test_stdio_mcp_environment_values_are_stored_sealed(mcp_server, scripted, mcp_script):
    """Issue 28 item 14: the values were stored in clear; the server still gets them."""
    from numi.testing import Scenario
    from turn_support import Api, db_rows, make_chat, of_type

    api = Api(mcp_server.url)
    status, server = api.post(
        "/api/mcp_servers",
        {
            "name": "sealed",
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(mcp_script)],
            "env": "MCP_TOKEN=tok-3141592653",
            "always_approve": False,
        },
    )
    assert status == 201, server
    ((stored,),) = db_rows(
        mcp_server, "SELECT env_json FROM mcp_servers WHERE id = ?", server["id"]
    )
    assert "tok-3141592653" not in stored and "numi:v1:" in stored, stored
    chat = make_chat(api, scripted, settings={"tools": ["mcp__sealed__getenv"]})
    scripted.enqueue(Scenario().tool_call("mcp__sealed__getenv", {"name": "MCP_TOKEN"}))
    scripted.enqueue(Scenario().text("Done."))
    ends = of_type(_turn(mcp_server, chat["id"], "token?"), "tool_end")
    assert ends and ends[0]["data"]["result"] == "tok-3141592653", ends
