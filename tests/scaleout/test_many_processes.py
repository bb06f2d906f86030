"""Two real `numi serve` processes (A and B) on one PostgreSQL database and one Redis, and
gunicorn with two workers: a live turn is the same turn from every process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from numi.testing import Scenario
from server_wait import wait_until_ready
from turn_support import ACCESS_TOKEN, ROOT, SSE, Api, free_port, make_chat, of_type, types
from server_wait import WAIT_SECONDS

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


def test_a_turn_started_on_a_streams_to_a_socket_on_b(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(30), chunks=30).delay(0.02))
    watcher = sockets(b, chat["id"])
    watcher.send(type="resume", last_event_id=None)
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="Stream thirty words")
    on_a = sender.events_until("content")
    # SSE resume on B from the first delta: the rest of the turn, once.
    first_delta = on_a[-1]["event_id"]
    resumed = SSE(
        b, "GET", f"/api/chat/resume/{chat['id']}", headers={"Last-Event-ID": str(first_delta)}
    )
    on_a += sender.events_until("turn_end")
    on_b = watcher.events_until("turn_end")
    # The turn's events; a new chat's title_update may follow its turn_end.
    rest = [e for e in resumed.events() if e["type"] != "title_update"]
    resumed.close()
    assert [e["event_id"] for e in rest] == [
        e["event_id"] for e in on_a if e["event_id"] > first_delta
    ]
    assert [e["event_id"] for e in on_b] == [e["event_id"] for e in on_a]
    assert [e["event_id"] for e in on_a] == list(
        range(on_a[0]["event_id"], on_a[0]["event_id"] + len(on_a))
    )
    assert "".join(e["data"]["delta"] for e in of_type(on_b, "content")) == words(30)
    assert Api(b.url).history(chat["id"])[-1]["content"] == words(30)
    status, body = Api(b.url).get(f"/api/chat/stream_status/{chat['id']}")
    assert (
        status == 200 and body["running"] is False and body["last_event_id"] >= on_a[-1]["event_id"]
    )


def test_resume_on_the_other_process_at_twenty_random_points_loses_and_repeats_nothing(
    pair, scripted, sockets
):
    a, b = pair
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(240), chunks=240).delay(0.012))
    reference = sockets(b, chat["id"])
    reference.send(type="resume", last_event_id=None)
    current = sockets(a, chat["id"])
    current.send(type="send", message="Stream many words")
    seen = current.events_until("content")
    servers = [b, a]
    for hop in range(20):
        for _ in range(rng.randint(1, 8)):
            if seen[-1]["type"] == "turn_end":
                break
            seen.append(current.receive())
        current.close()  # the connection drops; the client comes back on the other process
        current = sockets(servers[hop % 2], chat["id"])
        current.send(type="resume", last_event_id=seen[-1]["event_id"])
    if seen[-1]["type"] != "turn_end":
        seen += current.events_until("turn_end", timeout=WAIT_SECONDS)
    expected = reference.events_until("turn_end", timeout=WAIT_SECONDS)
    ids = [e["event_id"] for e in seen]
    assert ids == sorted(set(ids)), f"no event repeated (seed {seed})"
    assert ids == [e["event_id"] for e in expected if e["event_id"] >= ids[0]], (
        f"no event lost (seed {seed})"
    )
    assert "".join(e["data"]["delta"] for e in of_type(seen, "content")) == words(240)


def test_stop_from_b_reaches_the_turn_on_a(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(60), chunks=60).delay(0.1))
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="Count slowly")
    sender.events_until("content")
    status, body = Api(b.url).post(f"/api/chat/stop/{chat['id']}")
    assert status == 200 and body == {"stopped": True}
    events = sender.events_until("turn_end")
    assert of_type(events, "error")[0]["data"]["code"] == "cancelled"
    answer = Api(b.url).history(chat["id"])[-1]
    assert answer["role"] == "assistant" and answer["meta"]["error"]["code"] == "cancelled"
    status, body = Api(b.url).post(f"/api/chat/stop/{chat['id']}")
    assert status == 200 and body == {"stopped": False}


def test_approve_from_b_reaches_the_turn_on_a(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted, settings={"tools": ["guarded"]})
    scripted.enqueue(Scenario().tool_call("guarded", {"text": "approved on B"}))
    scripted.enqueue(Scenario().text("Finished."))
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="Use the guarded tool")
    approval = sender.events_until("tool_approval")[-1]["data"]
    other = sockets(b, chat["id"])
    other.send(type="approve", call_id="no-such-call", decision="approve")
    assert other.events_until("error")[-1]["data"]["code"] == "no_such_approval"
    other.send(
        type="approve", call_id=approval["call_id"], decision="approve", digest="not-the-card's"
    )
    assert other.events_until("error")[-1]["data"]["code"] == "approval_mismatch"
    other.send(
        type="approve", call_id=approval["call_id"], decision="approve", digest=approval["digest"]
    )
    events = sender.events_until("turn_end")
    [end] = of_type(events, "tool_end")
    assert end["data"]["ok"] is True and "approved on B" in end["data"]["result"]
    assert "done" in types(events)


def test_a_lane_stopped_and_approved_from_b_on_a_compare_turn_running_on_a(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted, settings={"tools": ["guarded"]})
    endpoint = chat["endpoint"]["id"]
    scripted.enqueue(Scenario().text("Lane zero ").stall().text("ends."), model="lane-0")
    scripted.enqueue(
        Scenario().tool_call("guarded", {"label": "asked on lane one"}),
        Scenario().text("Lane one used it."),
        model="lane-1",
    )
    sender = sockets(a, chat["id"])
    sender.send(
        type="send",
        message="Two lanes",
        compare=[{"endpoint_id": endpoint, "model": f"lane-{n}"} for n in range(2)],
    )
    events = []
    while not (
        of_type(events, "tool_approval")
        and any(e["data"].get("lane") == 0 for e in of_type(events, "content"))
    ):
        events.append(sender.receive(timeout=15))
    approval = of_type(events, "tool_approval")[0]["data"]
    assert approval["lane"] == 1
    # The approval, then the stop of lane 0, go through process B to the turn on A.
    other = sockets(b, chat["id"])
    other.send(
        type="approve", call_id=approval["call_id"], decision="approve", digest=approval["digest"]
    )
    status, body = Api(b.url).post(f"/api/chat/stop/{chat['id']}", {"lane": 0})
    assert status == 200 and body == {"stopped": True}
    events += sender.events_until("turn_end", timeout=WAIT_SECONDS)
    assert [e["data"] for e in of_type(events, "error")] == [
        {"code": "cancelled", "message": "Stopped.", "lane": 0}
    ]
    assert [e["data"]["lane"] for e in of_type(events, "done")] == [1]
    [end] = of_type(events, "tool_end")
    assert end["data"]["ok"] is True and end["data"]["lane"] == 1
    scripted.release()


def test_second_send_and_delete_on_b_while_a_runs_are_refused(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(40), chunks=40).delay(0.05))
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="Take a while", request_id="first")
    sender.events_until("content")
    other = sockets(b, chat["id"])
    other.send(type="send", message="Me too", request_id="second")
    assert other.events_until("error")[-1]["data"]["code"] == "turn_running"
    status, body = Api(b.url).call("DELETE", f"/api/session/{chat['id']}")
    assert status == 409 and body["error"]["code"] == "turn_running"
    idle = make_chat(Api(b.url), scripted)
    status, body = Api(b.url).get(f"/chats/running?ids={chat['id']},{idle['id']}")
    assert status == 200 and body["running"] == [chat["id"]], (
        "B's sidebar marks A's turn as answering"
    )
    sse = SSE(b, "POST", "/api/chat_stream", {"message": "And me", "session": chat["id"]})
    assert sse.response.status == 409
    sse.close()
    assert "done" in types(sender.events_until("turn_end"))
    assert [m["content"] for m in Api(b.url).history(chat["id"]) if m["role"] == "user"] == [
        "Take a while"
    ]


def test_a_request_id_sent_to_both_processes_at_once_is_saved_once(pair, scripted, sockets):
    a, b = pair
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text("Once."))
    scripted.enqueue(Scenario().text("Once."))
    first, second = sockets(a, chat["id"]), sockets(b, chat["id"])
    first.send(type="resume", last_event_id=None)
    second.send(type="resume", last_event_id=None)
    first.send(type="send", message="Same question", request_id="same-id")
    second.send(type="send", message="Same question", request_id="same-id")
    for events in (first.events_until("turn_end"), second.events_until("turn_end")):
        # Whichever process lost the race follows the winner's turn: no error at all.
        assert of_type(events, "error") == [], events
        users = [m for m in Api(a.url).history(chat["id"]) if m["role"] == "user"]
        assert [m["content"] for m in users] == ["Same question"]
        assert of_type(events, "accepted")[0]["data"]["message_id"] == users[0]["id"]
        assert "done" in types(events)


def test_kill_minus_nine_of_a_closes_the_turn_on_b_and_retry_on_b_answers(
    live_server_factory, cluster_env, scripted, sockets
):
    a = live_server_factory(**cluster_env)  # a process of its own: this test kills it
    b = live_server_factory(**cluster_env)
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(200), chunks=200).delay(0.05))
    watcher = sockets(b, chat["id"])
    watcher.send(type="resume", last_event_id=None)
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="Crash midway", request_id="crash-1")
    sender.events_until("content")
    a.kill()
    events = watcher.events_until("turn_end", timeout=60)
    error = of_type(events, "error")[-1]["data"]
    assert error["code"] == "interrupted"
    ids = [e["event_id"] for e in events]
    assert ids == sorted(set(ids))
    api_b = Api(b.url)
    assert api_b.get(f"/api/chat/stream_status/{chat['id']}")[1]["running"] is False
    assert [(m["role"], m["content"]) for m in api_b.history(chat["id"])] == [
        ("user", "Crash midway")
    ]
    # Retry (the page sends the same request_id again) answers the saved question on B.
    scripted.enqueue(Scenario().text("Answered after the crash."))
    watcher.send(type="send", message="Crash midway", request_id="crash-1")
    assert "done" in types(watcher.events_until("turn_end"))
    assert [(m["role"], m["content"]) for m in api_b.history(chat["id"])] == [
        ("user", "Crash midway"),
        ("assistant", "Answered after the crash."),
    ]


# --- gunicorn -k gevent -w 2 --------------------------------------------------------------------


@dataclass
class Gunicorn:
    port: int
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ACCESS_TOKEN}"}


@pytest.fixture(scope="module")
def gunicorn_server(cluster_env, pair, tmp_path_factory):
    """gunicorn with two gevent workers on the cluster's database and Redis (the pair has
    migrated the database already)."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "-k",
                "gevent",
                "-c",
                "python:numi.gunicorn_config",
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{port}",
                "--graceful-timeout",
                "2",
                "app:app",
            ],
            env={**os.environ, **cluster_env},
            cwd=str(ROOT),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = Gunicorn(port, proc)
    api = Api(server.url)
    wait_until_ready(
        proc,
        lambda: api.get("/healthz")[0] == 200,
        what="gunicorn",
        log=lambda: log_path.read_text()[-3000:],
    )
    yield server
    proc.terminate()
    proc.wait(15)


def test_gunicorn_two_workers_share_every_turn(gunicorn_server, scripted, sockets):
    server = gunicorn_server
    api = Api(server.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text(words(80), chunks=80).delay(0.03))
    # Connections land on either worker at random; with Redis it does not matter which.
    watchers = [sockets(server, chat["id"]) for _ in range(4)]
    for watcher in watchers:
        watcher.send(type="resume", last_event_id=None)
    sender = sockets(server, chat["id"])
    sender.send(type="send", message="Many workers")
    sender.events_until("content")
    for _ in range(3):
        other = sockets(server, chat["id"])
        other.send(type="send", message="Again")
        assert other.events_until("error")[-1]["data"]["code"] == "turn_running"
        assert api.get(f"/api/chat/stream_status/{chat['id']}")[1]["running"] is True
    reference = [e["event_id"] for e in sender.events_until("turn_end")]
    for watcher in watchers:
        events = watcher.events_until("turn_end")
        assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == words(80)
        assert [e["event_id"] for e in events if e["event_id"] >= reference[0]] == reference
    assert api.history(chat["id"])[-1]["content"] == words(80)
    # A stop through any worker reaches the turn.
    scripted.enqueue(Scenario().text(words(80), chunks=80).delay(0.1))
    sender.send(type="send", message="Stop me")
    sender.events_until("content")
    stopped = [api.post(f"/api/chat/stop/{chat['id']}")[1]["stopped"] for _ in range(1)]
    assert stopped == [True]
    assert of_type(sender.events_until("turn_end"), "error")[0]["data"]["code"] == "cancelled"
