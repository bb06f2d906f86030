"""bash cannot reach the server's secrets at all (issue 28, item 10): not through its own
environment, not through /proc/<server>/environ nor any ancestor's, and so it cannot decrypt
the stored endpoint keys either. The command prints what it finds reversed, which the output
masking does not catch, so only isolation can pass these tests."""

from __future__ import annotations

import sys

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env
from server_wait import WAIT_SECONDS

SECRET_KEY = "numi-server-secret-key-0123456789abcdef"
ACCESS = "numi-access-token-for-isolation-test-4242"
ENDPOINT_KEY = "sk-endpoint-key-only-the-server-may-read-77"

REVEAL = r"""
import os, sqlite3, sys
found = {}
pid = os.getpid()
while pid > 1:
    try:
        raw = open(f"/proc/{pid}/environ", "rb").read()
        print("read environ of", pid, len(raw), "bytes")
    except OSError as exc:
        print("cannot read environ of", pid, type(exc).__name__)
        raw = b""
    for entry in raw.split(b"\0"):
        name, _, value = entry.decode(errors="replace").partition("=")
        if name in ("NUMI_SECRET_KEY", "NUMI_ACCESS_TOKEN"):
            found[name] = value
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
for name, value in sorted(os.environ.items()):
    print("env", name, "=", value[::-1])
for name, value in found.items():
    print("found", name, value[::-1])
if "NUMI_SECRET_KEY" in found:
    from numi.crypto import unseal
    db = sqlite3.connect(os.path.join(sys.argv[1], "numi.db"))
    for (sealed,) in db.execute("select api_key from endpoints"):
        try:
            print("decrypted", unseal(sealed, found["NUMI_SECRET_KEY"])[::-1])
        except Exception as exc:
            print("cannot decrypt", type(exc).__name__)
"""


@pytest.fixture(scope="module")
def server(live_server_factory):
    return live_server_factory(
        # A process of its own: the test reads /proc/<server>/environ, which a forked
        # server's would hold the zygote's environment in, not this start's secrets.
        own_process=True,
        **turn_server_env(NUMI_SECRET_KEY=SECRET_KEY, NUMI_ACCESS_TOKEN=ACCESS),
    )


def run_command(server, scripted, workspace, command: str) -> str:
    api = Api(server.url, token=ACCESS)
    chat = make_chat(
        api,
        scripted,
        settings={"tools": ["bash"], "workspace": str(workspace), "auto_approve": True},
    )
    endpoint = chat["endpoint"]
    status, body = api.call("PATCH", f"/api/endpoints/{endpoint['id']}", {"api_key": ENDPOINT_KEY})
    assert status == 200, body
    scripted.enqueue(Scenario().tool_call("bash", {"command": command}))
    scripted.enqueue(Scenario().text("Finished."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="run it")
        events = socket.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        socket.close()
    [end] = of_type(events, "tool_end")
    return end["data"]["result"]


def assert_nothing_revealed(result: str) -> None:
    for secret in (SECRET_KEY, ACCESS, ENDPOINT_KEY):
        for form in (secret, secret[::-1], secret.upper()):
            assert form not in result, f"{secret} leaked as {form!r}:\n{result}"


def test_walking_up_the_parents_and_decrypting_the_endpoint_key_reveal_nothing(
    server, scripted, tmp_path
):
    (tmp_path / "reveal.py").write_text(REVEAL)
    result = run_command(
        server, scripted, tmp_path, f"{sys.executable} reveal.py {server.data_dir}"
    )
    assert result.startswith("[exit code 0]"), result
    assert "cannot read environ of" in result, "the server's environ is not readable"
    assert_nothing_revealed(result)


def test_cat_proc_ppid_environ_and_env_reveal_nothing(server, scripted, tmp_path):
    command = "cat /proc/$PPID/environ | rev; tr '\\0' '\\n' < /proc/$PPID/environ | tr a-z A-Z; env | rev"
    result = run_command(server, scripted, tmp_path, command)
    assert "Permission denied" in result, result
    assert_nothing_revealed(result)


def test_bash_runs_in_its_own_process_group_without_the_server_environment(
    server, scripted, tmp_path
):
    result = run_command(
        server, scripted, tmp_path, "ps -o pid=,pgid=,sid= -p $$ -p $PPID; env | cut -d= -f1"
    )
    lines = [line.split() for line in result.splitlines()[1:] if line.strip()]
    groups = [line for line in lines if len(line) == 3]
    assert len(groups) == 2 and groups[0][1] != groups[1][1], result
    names = {line[0] for line in lines if len(line) == 1}
    assert names and not any(
        name.startswith("NUMI_") or "TOKEN" in name or "SECRET" in name for name in names
    )
