"""bash through a live server: approval (approve, deny, no answer), auto-approve, timeout,
output cap, exit codes, a scrubbed environment, and the command escaped in the HTML view."""

from __future__ import annotations

import subprocess

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env, wait_until
from server_wait import WAIT_SECONDS

SECRETS = {
    "MY_SERVICE_API_KEY": "sk-live-0123456789abcdef",
    "GITHUB_TOKEN": "ghp_tokenvalue987654321",
    "DEPLOY_SECRET": "hunter2hunter2hunter2",
    "NUMI_SECRET_KEY": "numi-session-secret-4242424242",
    "OPENAI_API_KEY": "sk-proj-openai-key-1357913579",
    "WEBHOOK_SECRET": "s3cr3t/with+special=chars&more",
}


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(
        # A process of its own: the test reads /proc/<server>/environ, which a forked
        # server's would hold the zygote's environment in, not this start's secrets.
        own_process=True,
        **turn_server_env(
            NUMI_BASH_TIMEOUT_SECONDS="1.5",
            NUMI_BASH_MAX_OUTPUT_CHARS="2000",
            NUMI_APPROVAL_TIMEOUT_SECONDS="1.5",
            **SECRETS,
        ),
    )
    yield started
    started.stop()


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    return tmp_path


def bash_chat(server, scripted, workspace, **settings):
    return make_chat(
        Api(server.url),
        scripted,
        settings={"tools": ["bash"], "workspace": str(workspace), **settings},
    )


def run_turn(server, chat, command, *, decision=None, html=False):
    """Send a message whose answer runs `command`; answer the approval with `decision`."""
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="run it")
        if decision is None:
            return socket.events_until("turn_end", timeout=WAIT_SECONDS)
        events = socket.events_until("tool_approval")
        approval = events[-1]["data"]
        assert approval["name"] == "bash" and approval["arguments"] == {"command": command}
        socket.send(
            type="approve",
            call_id=approval["call_id"],
            digest=approval["digest"],
            decision=decision,
        )
        return events + socket.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        socket.close()


def tool_result(events) -> str:
    [end] = of_type(events, "tool_end")
    return end["data"]["result"]


def script(scripted, command):
    scripted.enqueue(Scenario().tool_call("bash", {"command": command}))
    scripted.enqueue(Scenario().text("Finished."))


def test_approved_command_runs_in_the_workspace(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace)
    script(scripted, "cat hello.txt; pwd; echo oops >&2; exit 3")
    events = run_turn(server, chat, "cat hello.txt; pwd; echo oops >&2; exit 3", decision="approve")
    result = tool_result(events)
    assert result.startswith("[exit code 3]")
    assert "hello from the workspace" in result and str(workspace) in result and "oops" in result
    assert of_type(events, "done")
    tool_message = [m for m in scripted.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert "hello from the workspace" in tool_message[0]["content"]


def test_denied_command_does_not_run_and_the_model_reads_the_denial(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace)
    script(scripted, "touch ran.txt")
    events = run_turn(server, chat, "touch ran.txt", decision="deny")
    assert tool_result(events) == "The user denied this call."
    assert not (workspace / "ran.txt").exists()
    assert not of_type(events, "tool_start")
    tool_message = [m for m in scripted.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert tool_message[0]["content"] == "The user denied this call."


def test_no_answer_in_time_counts_as_deny(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace)
    script(scripted, "touch ran.txt")
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="run it")
        events = socket.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        socket.close()
    assert of_type(events, "tool_approval")
    # The timeout's own result, not a denial or an error: the wait ran out.
    assert "No approval arrived in time" in tool_result(events)
    assert not (workspace / "ran.txt").exists()


def test_auto_approve_timeout_kills_the_command(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace, auto_approve=True)
    command = "echo started; sleep 31.2345; echo never"
    script(scripted, command)
    events = run_turn(server, chat, command)
    assert not of_type(events, "tool_approval"), "auto-approve skips the question"
    result = tool_result(events)
    assert (
        result.startswith("[timed out after 1.5 s (killed)]")
        and "started" in result
        and "never" not in result
    )
    # The kill reaches the process group: the sleep disappears (waited for, not assumed).
    wait_until(
        lambda: (
            subprocess.run(["pgrep", "-f", "sleep 31.2345"], capture_output=True).returncode == 1
        ),
        what="the killed command to be gone",
    )


def test_long_output_keeps_head_and_tail(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace, auto_approve=True)
    script(scripted, "seq 1 200000")
    result = tool_result(run_turn(server, chat, "seq 1 200000"))
    assert result.startswith("[exit code 0]\n1\n2\n3\n")
    assert result.rstrip().endswith("199999\n200000")
    assert "bytes of output omitted" in result and len(result) < 2200


def test_secrets_never_reach_the_command(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace, auto_approve=True)
    # The server's /proc environ is closed to the command (test_tools_bash_isolation.py);
    # a copy of it in a file stands for a secret the command can still read.
    (workspace / "leaked.env").write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    command = "env; echo ---; cat /proc/$PPID/environ; cat leaked.env"
    script(scripted, command)
    result = tool_result(run_turn(server, chat, command))
    own_env = result.split("---")[0]
    assert "PATH=" in own_env
    for name, value in SECRETS.items():
        assert name not in own_env, name
        assert value not in result, f"{name}'s value leaked"
    assert "NUMI_" not in own_env
    assert "[secret hidden]" in result, "a secret read from a file is masked"


def test_encoded_forms_of_secrets_are_masked_too(server, scripted, workspace):
    """A command that reads a secret (here from a file) and prints it
    base64-, hex- or URL-encoded, even at an offset inside other bytes, shows none of it."""
    import base64
    from urllib.parse import quote

    chat = bash_chat(server, scripted, workspace, auto_approve=True)
    command = "python3 encode_secrets.py leaked.env"
    (workspace / "leaked.env").write_text("\0".join(f"{k}={v}" for k, v in SECRETS.items()))
    (workspace / "encode_secrets.py").write_text(
        "import base64, sys, urllib.parse\n"
        "env = dict(line.split(b'=', 1) for line in open(sys.argv[1], 'rb').read().split(b'\\0')"
        " if b'=' in line)\n"
        "for name in (b'WEBHOOK_SECRET', b'DEPLOY_SECRET', b'NUMI_SECRET_KEY'):\n"
        "    v = env[name]\n"
        "    for prefix in (b'', b'x', b'xy'):\n"
        "        print(base64.b64encode(prefix + v).decode())\n"
        "    print(v.hex(), urllib.parse.quote(v, safe=''))\n"
    )
    script(scripted, command)
    result = tool_result(run_turn(server, chat, command))
    assert result.startswith("[exit code 0]") and "[secret hidden]" in result, result
    for name in ("WEBHOOK_SECRET", "DEPLOY_SECRET", "NUMI_SECRET_KEY"):
        value = SECRETS[name].encode()
        for form in (
            base64.b64encode(value),
            base64.b64encode(b"x" + value)[4:-4],
            base64.b64encode(b"xy" + value)[4:-4],
            value.hex().encode(),
            quote(value, safe="").encode(),
        ):
            assert form.decode() not in result, f"{name} leaked as {form.decode()}"


def test_command_is_escaped_in_the_html_view(server, scripted, workspace):
    chat = bash_chat(server, scripted, workspace)
    command = "echo '<img src=x onerror=alert(1)>' </script><script>alert(2)</script>"
    script(scripted, command)
    socket = Socket(server, chat["id"], html=True)
    try:
        socket.send(type="send", message="run it")
        frames = []
        while not any("Approve" in f for f in frames):
            frames.append(socket.receive())  # each receive waits at most 10 s
    finally:
        socket.close()
    page = "".join(frames)
    assert "needs your approval" in page and "Command to run" in page
    assert (
        "echo &#39;&lt;img src=x onerror=alert(1)&gt;&#39; &lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
        in page
    )
    assert "<img src=x" not in page and "<script>alert(2)" not in page
    Api(server.url).post(f"/api/chat/stop/{chat['id']}")


def test_chat_stream_fields_turn_tools_on(server, scripted, workspace):
    from turn_support import SSE

    api = Api(server.url)
    chat = make_chat(
        api, scripted, settings={"auto_approve": True, "tools": ["web_search", "fetch_page"]}
    )
    scripted.enqueue(Scenario().tool_call("bash", {"command": "echo mapped"}))
    scripted.enqueue(Scenario().text("Finished."))
    stream = SSE(
        server,
        "POST",
        "/api/chat_stream",
        {
            "session": chat["id"],
            "message": "go",
            "allow_bash": True,
            "allow_web_search": False,
            "use_rag": True,
            "workspace": str(workspace),
        },
    )
    try:
        events = []
        for event in stream.events():
            events.append(event)
            if event["type"] == "turn_end":
                break
    finally:
        stream.close()
    assert tool_result(events) == "[exit code 0]\nmapped\n"
    # The model only gets the schemas of the chat's tools: bash, the workspace files and
    # document search, no web.
    assert sorted(t["function"]["name"] for t in scripted.requests[0].body["tools"]) == [
        "bash",
        "list_files",
        "patch_file",
        "read_file",
        "search_documents",
        "search_files",
        "write_file",
    ]
    status, saved = api.get(f"/api/session/{chat['id']}")
    assert saved["settings"]["workspace"] == str(workspace.resolve())
    assert "web_search" not in saved["settings"]["tools"] and "bash" in saved["settings"]["tools"]
    status, body = api.post(
        "/api/chat_stream", {"session": chat["id"], "message": "go", "workspace": "/no/such/dir"}
    )
    assert status == 400 and body["error"]["code"] == "invalid_workspace"
