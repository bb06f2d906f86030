"""The server stopping mid-turn (issue 20): SIGTERM gives running answers a grace period
and saves what is left as interrupted with the queue paused; a JSON client resuming after
a crash is told its turn is gone. On both channel backends, with real `numi serve`
processes, signals and WebSocket clients."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from numi.testing import Scenario
from turn_support import (
    ACCESS_TOKEN,
    ROOT,
    Api,
    Socket,
    free_port,
    db_rows,
    make_chat,
    of_type,
    turn_server_env,
    types,
    wait_until,
)


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


def content_until(socket: Socket, text: str) -> list[dict]:
    """Events until the streamed content reads `text`."""
    events = []
    while "".join(e["data"]["delta"] for e in of_type(events, "content")) != text:
        events.append(socket.receive(timeout=15))
    return events


def terminate(server) -> None:
    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM: stopping" in server.log(), what="the server to take SIGTERM")


def test_sigterm_lets_a_running_answer_finish_and_refuses_new_turns(
    live_server_factory, scripted, channel_env
):
    server = live_server_factory(**turn_server_env(NUMI_SHUTDOWN_GRACE_SECONDS=30, **channel_env))
    api = Api(server.url)
    chat, other = make_chat(api, scripted), make_chat(api, scripted)
    text = words(40)
    scripted.enqueue(Scenario().text(text, chunks=40).delay(0.05))
    sender, idle = Socket(server, chat["id"]), Socket(server, other["id"])
    try:
        sender.send(type="send", message="Finish me")
        events = sender.events_until("content")
        terminate(server)
        idle.send(type="send", message="Too late")
        refused = idle.events_until("error")[-1]["data"]
        assert refused["code"] == "server_stopping"
        events += sender.events_until("turn_end", timeout=30)
        assert "done" in types(events) and not of_type(events, "error")
    finally:
        sender.close()
        idle.close()
    assert server.proc.wait(30) == 0
    rows = db_rows(
        server, "SELECT role, content FROM messages WHERE chat_id = ? ORDER BY id", chat["id"]
    )
    assert rows == [("user", "Finish me"), ("assistant", text)]
    assert db_rows(server, "SELECT COUNT(*) FROM messages WHERE chat_id = ?", other["id"]) == [(0,)]


def test_sigterm_saves_an_answer_still_running_after_the_grace_as_interrupted(
    live_server_factory, scripted, channel_env
):
    server = live_server_factory(**turn_server_env(NUMI_SHUTDOWN_GRACE_SECONDS=1, **channel_env))
    api = Api(server.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Half an answer", chunks=2).stall().text(" never sent"))
    sender = Socket(server, chat["id"])
    try:
        sender.send(type="send", message="Stuck", request_id="stuck")
        events = content_until(sender, "Half an answer")
        sender.send(type="send", message="Next", request_id="next", queue=True)
        events += sender.events_until("queued")
        terminate(server)
        events += sender.events_until("turn_end", timeout=30)
    finally:
        sender.close()
    error = of_type(events, "error")[-1]["data"]
    assert error["code"] == "interrupted"
    assert server.proc.wait(30) == 0
    rows = db_rows(
        server,
        "SELECT role, content, meta_json FROM messages WHERE chat_id = ? ORDER BY id",
        chat["id"],
    )
    assert [row[:2] for row in rows] == [("user", "Stuck"), ("assistant", "Half an answer")]
    assert json.loads(rows[1][2])["error"]["code"] == "interrupted"
    # The follow-up waits, paused, for the user: it did not start during the shutdown.
    server.start()
    status, queue = api.get(f"/api/session/{chat['id']}/queue")
    assert status == 200, queue
    assert [item["message"] for item in queue["items"]] == ["Next"] and queue["paused"] is True
    assert api.get(f"/api/chat/stream_status/{chat['id']}")[1]["running"] is False


def test_a_json_client_resuming_after_a_crash_is_told_its_turn_is_gone(
    live_server_factory, scripted, channel_env
):
    # With Redis the dead process's lease must lapse before another closes its turn.
    server = live_server_factory(**turn_server_env(NUMI_TURN_LEASE_MS=1500, **channel_env))
    chat = make_chat(Api(server.url), scripted)
    scripted.enqueue(Scenario().text("Cut off", chunks=1).stall())
    sender = Socket(server, chat["id"])
    sender.send(type="send", message="Crash", request_id="crash")
    last = sender.events_until("content")[-1]
    sender.close()
    server.kill()
    server.start()
    resumed = Socket(server, chat["id"])
    try:
        resumed.send(type="resume", last_event_id=last["event_id"], turn_id=last["turn_id"])
        events = resumed.events_until("turn_end", timeout=30)
    finally:
        resumed.close()
    assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
    assert events[-1]["turn_id"] == last["turn_id"]


@dataclass
class Gunicorn:
    """`gunicorn -k gevent -w 1 app:app` on a copy of the migrated SQLite database."""

    port: int
    data_dir: Path
    proc: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ACCESS_TOKEN}"}

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'numi.db'}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_gunicorn(tmp_path, database_templates, env: dict[str, str]) -> Gunicorn:
    port = free_port()
    data_dir = tmp_path / "data"
    database_templates.sqlite_copy(data_dir / "numi.db")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
    environment.update(
        NUMI_DATA_DIR=str(data_dir),
        NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
        NUMI_AUTO_ENDPOINTS="0",
        NUMI_TEST_FAST_PASSWORD_HASHES="1",
        **env,
    )
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "-k", "gevent", "-w", "1"]
            + ["-c", "python:numi.gunicorn_config"]
            + ["-b", f"127.0.0.1:{port}", "app:app"],
            env=environment,
            cwd=str(ROOT),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = Gunicorn(port, data_dir, proc, log_path)
    wait_until(
        lambda: proc.poll() is not None or _healthy(server), timeout=60, what="gunicorn to start"
    )
    assert proc.poll() is None, server.log()[-3000:]
    return server


def _healthy(server: Gunicorn) -> bool:
    try:
        return Api(server.url).get("/healthz")[0] == 200
    except OSError:
        return False


def test_gunicorns_graceful_stop_saves_a_running_answer_as_interrupted(
    tmp_path, database_templates, scripted, channel_env
):
    if shutil.which("gunicorn", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("gunicorn is not installed (pip install -e '.[gunicorn]')")
    server = start_gunicorn(
        tmp_path, database_templates, turn_server_env(NUMI_SHUTDOWN_GRACE_SECONDS=1, **channel_env)
    )
    try:
        chat = make_chat(Api(server.url), scripted)
        scripted.enqueue(Scenario().text("Half an answer", chunks=2).stall())
        sender = Socket(server, chat["id"])
        sender.send(type="send", message="Stuck", request_id="stuck")
        events = content_until(sender, "Half an answer")
        server.proc.send_signal(signal.SIGTERM)  # the master: gunicorn's graceful stop
        events += sender.events_until("turn_end", timeout=30)
        sender.close()
        assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
        assert server.proc.wait(40) == 0, server.log()[-3000:]
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
    rows = db_rows(
        server, "SELECT role, content FROM messages WHERE chat_id = ? ORDER BY id", chat["id"]
    )
    assert rows == [("user", "Stuck"), ("assistant", "Half an answer")]
