"""Infrastructure faults with real processes (issue 20): a Redis of the test's own that is
killed and started again, `numi serve` processes stopped with SIGSTOP and resumed, and
SIGTERM. What must hold: one turn per chat, nothing published or saved by a turn that lost
its chat, pages and Stop while Redis is down, and clients made whole after an outage."""

from __future__ import annotations

import signal
import urllib.request

import pytest
import redis

from numi.testing import Scenario
from numi.turns.redis_keys import chat_key
from turn_support import (
    ACCESS_TOKEN,
    Api,
    make_chat,
    of_type,
    streamed_answer,
    turn_server_env,
    types,
    wait_until,
)
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.redis

SECRET = "fault-test-secret"
PREFIX = "numi-fault:"


def words(count: int, stem: str = "w") -> str:
    return " ".join(f"{stem}{i}" for i in range(count))


@pytest.fixture
def live_server_factory(live_server_factory, private_redis):
    """The module's factory, but this test's servers stop when it ends, while its Redis still
    runs: a server still publishing to a Redis that is gone retries, and its SIGTERM at the
    module's end was waited out (the 10 s before the kill) every other run."""
    started = []

    def start(**env):
        started.append(live_server_factory(**env))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def fault_env(postgres_module_url, tmp_path, private_redis):
    """`fault_env(**extra)`: the environment of processes sharing one PostgreSQL database,
    one data dir and this test's own redis-server."""

    def env(**extra):
        return turn_server_env(
            NUMI_DATABASE_URL=postgres_module_url,
            NUMI_SECRET_KEY=SECRET,
            NUMI_DATA_DIR=str(tmp_path / "data"),
            NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
            NUMI_REDIS_URL=private_redis.url,
            NUMI_REDIS_PREFIX=PREFIX,
            **extra,
        )

    return env


def until_reply(socket, timeout: float = 30) -> dict:
    """The answer to this socket's own send: `queued`, its turn's `accepted`, or an error
    (events of a turn already running, which the socket also follows, are passed over)."""
    while True:
        event = socket.receive(timeout=timeout)
        if event["type"] in ("queued", "accepted") or (
            event["type"] == "error" and event["turn_id"] is None
        ):
            return event


def transcript(api: Api, chat_id: str) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in api.history(chat_id)]


def get_page(server, path: str) -> tuple[int, str]:
    request = urllib.request.Request(server.url + path, headers=server.headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read().decode()


# --- item 1: one turn per chat, under every fault ----------------------------------------------


def test_a_follow_up_sent_right_after_a_redis_restart_queues_behind_the_running_turn(
    live_server_factory, fault_env, private_redis, scripted, sockets
):
    # A 6 s lease: the owner renews every 2 s, so the follow-up below comes before it does.
    env = fault_env(NUMI_TURN_LEASE_MS=6000)
    a = live_server_factory(**env)
    b = live_server_factory(**env)
    chat = make_chat(Api(a.url), scripted)
    head, tail = words(75, "f") + " ", words(75, "g")
    first = head + tail
    # It streams through the restart, then waits for the follow-up's reply: the turn runs
    # when the follow-up comes, however long the restart takes (9 s of pacing did that
    # before, and was waited out every run).
    scripted.enqueue(
        Scenario().text(head, chunks=75).delay(0.02).stall().text(tail, chunks=75),
        Scenario().text("Second answer."),
    )
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="First", request_id="first")
    events = sender.events_until("content")
    private_redis.kill()  # every lease, stream and counter is gone
    private_redis.start()
    follower = sockets(b, chat["id"])
    follower.send(type="send", message="Second", request_id="second", queue=True)
    reply = until_reply(follower)
    assert reply["type"] == "queued", reply  # not a second turn beside the first
    scripted.release()
    events += sender.events_until("turn_end", timeout=60)
    assert "done" in types(events) and not of_type(events, "error")
    # Read as a client must: the writer falls behind while Redis restarts on a busy machine,
    # and a snapshot then stands for the deltas it dropped.
    assert streamed_answer(events) == first
    wait_until(
        lambda: len(Api(b.url).history(chat["id"])) == 4, timeout=WAIT_SECONDS, what="the follow-up"
    )
    assert transcript(Api(b.url), chat["id"]) == [
        ("user", "First"),
        ("assistant", first),
        ("user", "Second"),
        ("assistant", "Second answer."),
    ]


def test_a_process_stalled_past_its_lease_stops_at_once_and_saves_nothing(
    live_server_factory, fault_env, private_redis, scripted, sockets
):
    env = fault_env(NUMI_TURN_LEASE_MS=1500)
    a = live_server_factory(**env)
    b = live_server_factory(**env)
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(
        Scenario().text(words(300), chunks=300).delay(0.03), Scenario().text("Answered on B.")
    )
    watcher = sockets(b, chat["id"])
    watcher.send(type="resume", last_event_id=None)
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="First", request_id="first")
    sender.events_until("content")
    a.proc.send_signal(signal.SIGSTOP)
    try:
        events = watcher.events_until("turn_end", timeout=WAIT_SECONDS)
        stalled_turn = events[-1]["turn_id"]
        assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
        # The chat is free: B answers a follow-up while A is still stopped.
        watcher.send(type="send", message="Second", request_id="second")
        assert "done" in types(watcher.events_until("turn_end"))
    finally:
        a.proc.send_signal(signal.SIGCONT)
    # A wakes up mid-stream with a lease that is gone: it stops before its next save.
    wait_until(lambda: "lost its chat's lease" in a.log(), timeout=WAIT_SECONDS, what="A to stop")
    assert transcript(Api(b.url), chat["id"]) == [
        ("user", "First"),
        ("user", "Second"),
        ("assistant", "Answered on B."),
    ]
    events_key = chat_key(PREFIX, chat["id"], "events")
    entries = redis.Redis.from_url(private_redis.url).xrange(events_key)
    assert entries
    stalled = [
        fields[b"e"]
        for _, fields in entries
        if f'"turn_id":"{stalled_turn}"'.encode() in fields[b"e"]
    ]
    # The stream holds B's turn since it began: A published nothing after waking up.
    assert stalled == []


# --- item 3: a Redis outage takes down neither the pages nor Stop --------------------------------


def test_while_redis_is_down_pages_render_sends_are_refused_and_stop_goes_through_after(
    live_server_factory, fault_env, private_redis, scripted, sockets
):
    env = fault_env(NUMI_TURN_LEASE_MS=3000)
    a = live_server_factory(**env)
    b = live_server_factory(**env)
    chat = make_chat(Api(a.url), scripted)
    other = make_chat(Api(a.url), scripted)
    scripted.enqueue(Scenario().text(words(600), chunks=600).delay(0.05))
    sender = sockets(a, chat["id"])
    sender.send(type="send", message="A long one")
    sender.events_until("content")
    private_redis.kill()
    api_b = Api(b.url)
    # Pages render, and the chat page says live state is unknown.
    assert get_page(b, "/")[0] == 200
    status, page = get_page(b, f"/c/{chat['id']}")
    assert status == 200 and "Live state is unknown" in page
    status, body = api_b.get(f"/api/chat/stream_status/{chat['id']}")
    assert status == 200 and body["running"] is None and body["live"] == "unknown"
    # Sends are refused with the README's code; nothing is saved.
    status, body = api_b.post("/api/chat_stream", {"session": other["id"], "message": "Hi"})
    assert (status, body["error"]["code"]) == (503, "live_unavailable")
    socket = sockets(b, other["id"])
    socket.send(type="send", message="Hi")
    assert until_reply(socket)["data"]["code"] == "live_unavailable"
    assert api_b.history(other["id"]) == []
    # Stop from the process that does not run the turn says it waits for Redis ...
    status, body = api_b.post(f"/api/chat/stop/{chat['id']}")
    assert (status, body["error"]["code"]) == (503, "stop_pending")
    private_redis.start()
    # ... and goes through once Redis is back.
    events = sender.events_until("turn_end", timeout=60)
    assert of_type(events, "error")[-1]["data"]["code"] == "cancelled"
    saved = api_b.history(chat["id"])[-1]
    assert saved["role"] == "assistant" and saved["content"].startswith("w0 w1")


# --- item 4: clients connected through a long outage are made whole -----------------------------


def test_clients_connected_through_an_outage_longer_than_the_buffer_are_made_whole(
    live_server_factory, fault_env, private_redis, scripted, sockets
):
    # A small buffer: the events of the outage outgrow it, as 30 s of a fast answer would.
    server = live_server_factory(**fault_env(NUMI_TURN_BUFFER_EVENTS=8))
    api = Api(server.url)
    chat = make_chat(api, scripted)
    head, tail = "Before the outage. ", words(200, "t")
    scripted.enqueue(Scenario().text(head, chunks=3).stall().text(tail, chunks=200).delay(0.01))
    watcher = sockets(server, chat["id"])
    watcher.send(type="resume", last_event_id=None)
    page = sockets(server, chat["id"], html=True)
    page.send(type="resume", last_event_id=None)
    sender = sockets(server, chat["id"])
    sender.send(type="send", message="Long", request_id="long")
    seen = watcher.events_until("content")
    private_redis.kill()
    scripted.release()  # the rest streams, and is saved, while Redis is down
    answer = wait_until(
        lambda: next((m for m in api.history(chat["id"]) if m["role"] == "assistant"), None),
        timeout=WAIT_SECONDS,
        what="the saved answer",
    )
    assert answer["content"] == head + tail
    private_redis.start()
    seen += watcher.events_until("turn_end", timeout=60)
    # Either the outage's events outgrew the buffer, and a snapshot of the turn so far stands
    # for the ones the client missed, with what follows completing the answer; or the writer
    # coalesced the outage's deltas while Redis was away (the faster read path delivers the
    # tail in a few frames) and every one of them arrives. Both leave the client whole:
    # nothing may be missing silently.
    snapshots = [i for i, e in enumerate(seen) if e["type"] == "snapshot"]
    if snapshots:
        after = seen[snapshots[-1] :]
        text = after[0]["data"]["content"] + "".join(
            e["data"]["delta"] for e in of_type(after, "content")
        )
        if answer["id"] in after[0]["data"]["saved_message_ids"]:
            assert text == ""  # it stands for the saved answer: the client shows that one
        else:
            assert text == head + tail and "message_saved" in types(after)
    else:
        text = "".join(e["data"]["delta"] for e in of_type(seen, "content"))
        assert text == head + tail, [(e["event_id"], e["type"]) for e in seen]
        assert "message_saved" in types(seen)
    # The page shows the whole answer too.
    frames = []
    wait_until(
        lambda: frames.append(page.receive(timeout=30)) or tail in frames[-1],
        timeout=60,
        what="the page to show the saved answer",
    )


# --- item 7: a resume from an id above the chat's counter ------------------------------------------


def test_a_resume_from_an_id_above_the_counter_gets_the_turn_and_its_end(
    live_server_factory, fault_env, scripted, sockets
):
    server = live_server_factory(**fault_env())
    chat = make_chat(Api(server.url), scripted)
    text = words(40)
    scripted.enqueue(Scenario().text(text, chunks=40).delay(0.03))
    sender = sockets(server, chat["id"])
    sender.send(type="send", message="Go")
    last = sender.events_until("content")[-1]["event_id"]
    # An id from before Redis lost its data (the counter restarts lower).
    resumed = sockets(server, chat["id"])
    resumed.send(type="resume", last_event_id=last + 10**9)
    events = resumed.events_until("turn_end", timeout=WAIT_SECONDS)
    assert events[0]["type"] == "snapshot" and "done" in types(events)
    snapshot_text = events[0]["data"]["content"]
    rest = "".join(e["data"]["delta"] for e in of_type(events, "content"))
    assert snapshot_text + rest == text
