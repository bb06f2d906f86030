"""The server stopping mid-turn (issue 20): SIGTERM gives running answers a grace period
and saves what is left as interrupted with the queue paused; a JSON client resuming after
a crash is told its turn is gone. On both channel backends, with real `numi serve`
processes, signals and WebSocket clients."""

from __future__ import annotations

import json
import signal


from numi.testing import Scenario
from turn_support import (
    Api,
    Gunicorn,
    Socket,
    db_rows,
    make_chat,
    of_type,
    turn_server_env,
    types,
    wait_until,
)
from server_wait import WAIT_SECONDS


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
        events += sender.events_until("turn_end", timeout=WAIT_SECONDS)
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
        events += sender.events_until("turn_end", timeout=WAIT_SECONDS)
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
        events = resumed.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        resumed.close()
    assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
    assert events[-1]["turn_id"] == last["turn_id"]


def start_gunicorn(tmp_path, database_templates, env: dict[str, str]) -> Gunicorn:
    """One gevent worker on a copy of the migrated SQLite database."""
    data_dir = tmp_path / "data"
    database_templates.sqlite_copy(data_dir / "numi.db")
    return Gunicorn(data_dir, 1, **env)


def test_gunicorns_graceful_stop_saves_a_running_answer_as_interrupted(gunicorn_server, scripted):
    server = gunicorn_server
    chat = make_chat(Api(server.url), scripted)
    scripted.enqueue(Scenario().text("Half an answer", chunks=2).stall())
    sender = Socket(server, chat["id"])
    sender.send(type="send", message="Stuck", request_id="stuck")
    events = content_until(sender, "Half an answer")
    server.proc.send_signal(signal.SIGTERM)  # the master: gunicorn's graceful stop
    events += sender.events_until("turn_end", timeout=WAIT_SECONDS)
    sender.close()
    assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
    assert server.proc.wait(40) == 0, server.log()[-3000:]
    rows = db_rows(
        server, "SELECT role, content FROM messages WHERE chat_id = ? ORDER BY id", chat["id"]
    )
    assert rows == [("user", "Stuck"), ("assistant", "Half an answer")]
