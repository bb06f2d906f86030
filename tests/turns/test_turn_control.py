"""Stop, reconnect, resume, snapshots, crashes, SSE and bad input — against a live server."""

from __future__ import annotations

import os
import signal
import time

import pytest

from numi.testing import Scenario

from turn_support import (
    SSE,
    Api,
    Socket,
    make_chat,
    of_type,
    streamed_answer,
    turn_server_env,
    types,
    wait_until,
)
from server_wait import WAIT_SECONDS


def test_stop_during_streaming_keeps_the_partial_answer(api, scripted, chat, sockets):
    scripted.enqueue(
        Scenario().text("one two three four five six seven eight nine ten", chunks=10).delay(0.1)
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="Count slowly")
    before = ws.events_until("content")
    ws.send(type="stop")
    after = ws.events_until("turn_end")
    events = before + after
    error = of_type(events, "error")[0]["data"]
    assert error["code"] == "cancelled"
    assert types(events)[-2:] == ["error", "turn_end"]
    shown = "".join(e["data"]["delta"] for e in of_type(events, "content"))
    answer = api.history(chat["id"])[-1]
    assert answer["role"] == "assistant"
    assert answer["content"] == shown and 0 < len(shown) < len(
        "one two three four five six seven eight nine ten"
    )
    assert answer["meta"]["error"]["code"] == "cancelled"


def test_stop_during_a_tool_lets_the_tool_finish(api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"tools": ["sleepy"]})
    scripted.enqueue(Scenario().tool_call("sleepy", {"seconds": 0.8, "label": "side effect"}))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Do something slow")
    ws.events_until("tool_start")
    ws.send(type="stop")
    events = ws.events_until("turn_end")
    names = types(events)
    assert names.index("tool_end") < names.index("error")
    assert of_type(events, "tool_end")[0]["data"]["ok"] is True
    assert of_type(events, "error")[0]["data"]["code"] == "cancelled"
    messages = api.history(chat["id"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert "side effect" in messages[-1]["content"]
    assert len(scripted.requests) == 1, "no model call after a stop"


def test_disconnect_and_resume_loses_and_repeats_nothing(server, scripted, api, chat, sockets):
    scripted.enqueue(Scenario().text(" ".join(f"w{i}" for i in range(40)), chunks=40).delay(0.03))
    watcher = sockets(chat["id"])  # connected throughout: the reference
    watcher.send(type="resume", last_event_id=None)
    # Wait on its subscription: one socket's messages are handled in order, so the answer to
    # this approve (nothing waits for one) comes once the resume has subscribed. A send on
    # the other socket before that would start the turn first, and this socket would get a
    # snapshot instead of the first events (the protocol's rule).
    watcher.send(type="approve", call_id="nc_nothing", decision="deny")
    assert watcher.events_until("error")[-1]["data"]["code"] == "no_such_approval"
    flaky = sockets(chat["id"])
    flaky.send(type="send", message="Stream forty words")
    seen = flaky.events_until("content")
    while len(of_type(seen, "content")) < 3:
        seen.append(flaky.receive())
    flaky.close()  # the browser goes away; the turn must go on
    # ... and it does: the watcher sees more words go out while no one else listens.
    reference = []
    while not any(
        e["type"] == "content" and e["event_id"] > seen[-1]["event_id"] + 3 for e in reference
    ):
        reference.append(watcher.receive())
    again = sockets(chat["id"])
    again.send(type="resume", last_event_id=seen[-1]["event_id"])
    rest = again.events_until("turn_end", timeout=WAIT_SECONDS)
    reference += watcher.events_until("turn_end", timeout=WAIT_SECONDS)

    combined = [e["event_id"] for e in seen + rest]
    assert combined == sorted(set(combined)), "no event repeated"
    assert combined == [e["event_id"] for e in reference if e["event_id"] >= combined[0]], (
        "no event lost"
    )
    assert "".join(e["data"]["delta"] for e in of_type(seen + rest, "content")) == " ".join(
        f"w{i}" for i in range(40)
    )
    assert api.history(chat["id"])[-1]["content"] == " ".join(f"w{i}" for i in range(40))


def test_reconnect_after_the_buffer_overflowed_gets_a_snapshot_then_live(
    live_server_factory, scripted, channel_env
):
    """The client reads what follows as every client must: a `snapshot` stands for the turn
    up to its id, the deltas after it extend it. With Redis, a writer that falls more than
    the buffer behind (a busy machine) writes a second snapshot into the stream in place of
    the deltas it drops; adding up deltas alone then missed some (issue 20 item 4)."""
    server = live_server_factory(
        **turn_server_env(NUMI_TURN_BUFFER_EVENTS=5, NUMI_FRAME_INTERVAL_MS=0, **channel_env)
    )
    api = Api(server.url)
    chat = make_chat(api, scripted)
    words = [f"t{i} " for i in range(60)]
    scripted.enqueue(Scenario().text("".join(words), chunks=60).delay(0.02))
    ws = Socket(server, chat["id"])
    try:
        ws.send(type="send", message="Go")
        seen = ws.events_until("content")
        last = seen[-1]["event_id"]
        ws.close()
        # more than the 5 buffered events happen meanwhile
        wait_until(
            lambda: api.get(f"/api/chat/stream_status/{chat['id']}")[1]["last_event_id"] > last + 5,
            what="more events than the buffer holds",
        )
        ws = Socket(server, chat["id"])
        ws.send(type="resume", last_event_id=last)
        rest = ws.events_until("content")
        # The server stalls (a busy machine) while the provider goes on: with Redis the
        # writer then finds more than the buffer pending, and a snapshot stands for it.
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.3)  # the stall's length (15 deltas at 20 ms), not a wait
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        rest += ws.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        ws.close()
    assert rest[0]["type"] == "snapshot"
    assert streamed_answer(rest) == "".join(words), "the snapshots and live events give it whole"
    assert [e["event_id"] for e in rest[1:]] == list(
        range(rest[0]["event_id"] + 1, rest[0]["event_id"] + len(rest))
    )


def test_kill_minus_nine_mid_turn_leaves_only_saved_boundaries(
    live_server_factory, scripted, channel_env
):
    shared = bool(channel_env)
    server = live_server_factory(
        **turn_server_env(**channel_env, **({"NUMI_TURN_LEASE_MS": 1000} if shared else {}))
    )
    api = Api(server.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("never finished " * 20, chunks=40).delay(0.05))
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="Start and crash")
    last_seen = ws.events_until("content")[-1]["event_id"]
    server.kill()
    ws.close()
    server.start()
    messages = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in messages] == [("user", "Start and crash")]
    if shared:
        # With Redis the dead turn stays visible until its lease lapses; then it is closed
        # for every client with an `interrupted` error.
        ws = Socket(server, chat["id"])
        try:
            ws.send(type="resume", last_event_id=last_seen)
            events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
        finally:
            ws.close()
        assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
    status, body = api.get(f"/api/chat/stream_status/{chat['id']}")
    assert status == 200 and body["running"] is False
    # The chat is usable again.
    scripted.enqueue(Scenario().text("Back."))
    ws = Socket(server, chat["id"])
    try:
        ws.send(type="send", message="Again")
        assert "done" in types(ws.events_until("turn_end"))
    finally:
        ws.close()
    server.stop()


def test_sse_stream_status_stop_and_resume(server, api, scripted, chat):
    scripted.enqueue(
        Scenario().text(" ".join("abcdefghijklmnopqrstuvwxyz" * 2), chunks=52).delay(0.1)
    )
    stream = SSE(
        server, "POST", "/api/chat_stream", {"message": "SSE please", "session": chat["id"]}
    )
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type").startswith("text/event-stream")
    events = stream.events()
    received = []
    for event in events:
        received.append(event)
        if event["type"] == "content":
            break
    status, body = api.get(f"/api/chat/stream_status/{chat['id']}")
    assert body["running"] is True and body["turn_id"] == received[0]["turn_id"]

    resumed = SSE(
        server,
        "GET",
        f"/api/chat/resume/{chat['id']}",
        headers={"Last-Event-ID": str(received[-1]["event_id"])},
    )
    status, body = api.post(f"/api/chat/stop/{chat['id']}")
    assert body == {"stopped": True}
    rest = list(events)
    tail = list(resumed.events())
    stream.close()
    resumed.close()
    assert types(rest)[-2:] == ["error", "turn_end"] and rest[-2]["data"]["code"] == "cancelled"
    assert [e["event_id"] for e in tail] == [e["event_id"] for e in rest]
    assert api.get(f"/api/chat/stream_status/{chat['id']}")[1]["running"] is False
    nothing = SSE(
        server,
        "GET",
        f"/api/chat/resume/{chat['id']}",
        headers={"Last-Event-ID": str(rest[-1]["event_id"])},
    )
    assert nothing.response.status == 204
    nothing.close()


def test_bad_input_over_the_websocket_changes_nothing(server, api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    ws.ws.send("{not json")
    assert ws.receive()["data"]["code"] == "invalid_json"
    ws.send(type="dance")
    assert ws.receive()["data"]["code"] == "unknown_type"
    ws.send(type="send", message="x" * 300_000)
    assert ws.receive()["data"]["code"] in ("too_long", "too_large")
    ws.send(type="send", message="   ")
    assert ws.receive()["data"]["code"] == "empty_message"
    ws.send(type="send", message="hi", attachments=[999999])
    assert ws.receive()["data"]["code"] == "attachment_missing"
    ws.send(type="approve", call_id="nope", decision="approve")
    assert ws.receive()["data"]["code"] == "no_such_approval"
    assert api.history(chat["id"]) == []
    assert scripted.requests == []
    # The connection is still usable, and a second send while a turn runs is refused.
    scripted.enqueue(Scenario().text("slow " * 10, chunks=10).delay(0.05))
    ws.send(type="send", message="Real question")
    ws.events_until("content")
    ws.send(type="send", message="Impatient")
    events = ws.events_until("turn_end")
    refused = [e for e in events if e["type"] == "error" and e["event_id"] is None]
    assert refused and refused[0]["data"]["code"] == "turn_running"
    assert [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"] == [
        "Real question"
    ]


def test_websocket_to_a_missing_chat_is_a_404(server):
    # Another user's chat over the WebSocket: tests/web/test_isolation.py (ws.chat_socket).
    from numi.testing.websocket_client import WebSocketClient as Client
    from simple_websocket.errors import ConnectionError as WsConnectionError

    with pytest.raises(WsConnectionError) as missing:
        Client.connect(
            f"ws://127.0.0.1:{server.port}/ws/00000000-0000-0000-0000-000000000000",
            headers={"Origin": server.url, **server.headers},
        )
    assert missing.value.status_code == 404


def test_html_view_swaps_fragments_by_id_and_coalesces_deltas(server, api, scripted, chat, sockets):
    tokens = [f"tok{i} " for i in range(300)]
    scripted.enqueue(Scenario().text("".join(tokens), chunks=300).usage(5, 300))
    ws = sockets(chat["id"], html=True)
    ws.send(type="resume", last_event_id=None, last_message_id=0)
    ws.send(type="send", message="Fast <b>stream</b>")
    frames = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        frame = ws.receive()
        frames.append(frame)
        if 'data-running="0"' in frame:
            break
    html = "".join(frames)
    assert len(frames) < 100, (
        f"{len(frames)} WebSocket messages for 300 tokens: deltas are not coalesced"
    )
    assert "hx-swap-oob" in frames[0]
    assert 'id="turn-' in html and 'id="event-cursor"' in html
    assert "Fast &lt;b&gt;stream&lt;/b&gt;" in html and "<b>stream</b>" not in html
    done_message = api.history(chat["id"])[-1]
    assert f'id="msg-{done_message["id"]}"' in html
    assert "tok299" in html
