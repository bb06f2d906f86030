"""Turn edges (issue 14 "Turns"): retries after a tool step, interrupted turns after a
crash, the provider idle deadline, stop during an approval, reused request ids, the
snapshot's history boundary and SSE resumes of a finished turn. Live server, scripted
provider through the real SDKs, real WebSocket and SSE clients."""

from __future__ import annotations

import pytest

from numi.testing import Scenario

from turn_support import (
    SSE,
    Api,
    Socket,
    make_chat,
    of_type,
    page_retry,
    turn_server_env,
    types,
)


@pytest.fixture(scope="module")
def server(live_server_factory):
    """The turn tests' server with a short provider idle deadline."""
    started = live_server_factory(**turn_server_env(NUMI_PROVIDER_IDLE_SECONDS="0.5"))
    yield started
    started.stop()


def _page(api: Api, chat_id: str) -> str:
    import urllib.request

    request = urllib.request.Request(f"{api.base}/c/{chat_id}", headers=api.auth)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def test_retry_button_after_a_failed_step_that_followed_a_tool_answers(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted, settings={"tools": ["echo"]})
    scripted.enqueue(Scenario().tool_call("echo", {"x": 1}))
    scripted.enqueue(Scenario.http_error(500))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Use a tool", request_id="tool-then-fail")
    failed = ws.events_until("turn_end")
    assert of_type(failed, "error")[0]["data"]["code"] == "provider_unavailable"

    scripted.enqueue(Scenario().text("The final answer."))
    failed_id = api.history(chat["id"])[-1]["id"]
    status, html = page_retry(api, chat["id"], failed_id)
    assert status == 200  # the transcript without the failed answer, then the turn
    assert f'id="msg-{failed_id}"' not in html
    retried = ws.events_until("turn_end")
    assert "done" in types(retried) and "error" not in types(retried)
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "The final answer."
    assert of_type(retried, "done")[0]["data"]["message_id"] == answer["id"]
    # The model saw the tool step and its result again.
    sent = [m["role"] for m in scripted.requests[-1].body["messages"]]
    assert sent == ["system", "user", "assistant", "tool"]


def test_after_a_crash_every_interrupted_turn_shows_with_retry_and_a_resend_answers(
    server, api, scripted
):
    tool_chat = make_chat(api, scripted, settings={"tools": ["sleepy"]})
    text_chat = make_chat(api, scripted)
    # A turn killed while its tool runs, and one killed mid-answer.
    scripted.enqueue(Scenario().tool_call("sleepy", {"seconds": 60, "label": "long"}))
    ws = Socket(server, tool_chat["id"])
    ws.send(type="send", message="Run the long tool", request_id="crash-in-tool")
    ws.events_until("tool_start")
    ws.close()
    scripted.enqueue(Scenario().text("lost in the crash", chunks=2).stall())
    ws = Socket(server, text_chat["id"])
    ws.send(type="send", message="Answer slowly", request_id="crash-in-text")
    lost_turn = ws.events_until("content")[-1]["turn_id"]
    ws.close()
    server.kill()
    scripted.release()
    server.start()

    # A page that was open reconnects and asks for its live turn: the server closes it.
    page = Socket(server, text_chat["id"], html=True)
    try:
        page.send(type="resume", last_message_id=0, turn_id=lost_turn)
        frame = page.receive()
    finally:
        page.close()
    assert 'data-code="interrupted"' in frame and "Retry" in frame
    assert f'id="turn-{lost_turn}-live"' in frame, "the live part is removed"

    for chat in (tool_chat, text_chat):
        page = _page(api, chat["id"])
        assert 'id="turn-interrupted"' in page and f"/c/{chat['id']}/retry" in page, (
            "notice with Retry"
        )
    page = _page(api, tool_chat["id"])
    assert "tool-interrupted" in page and "queued" not in page

    # A client resends its request after the crash: the tool step is saved, the answer is not.
    scripted.reset()
    scripted.enqueue(Scenario().text("Answered after the crash."))
    ws = Socket(server, tool_chat["id"])
    try:
        ws.send(type="send", message="Run the long tool", request_id="crash-in-tool")
        events = ws.events_until("turn_end")
    finally:
        ws.close()
    assert "done" in types(events)
    assert api.history(tool_chat["id"])[-1]["content"] == "Answered after the crash."
    assert len(scripted.requests) == 1
    assert 'id="turn-interrupted"' not in _page(api, tool_chat["id"])


def test_a_provider_sending_only_keep_alives_times_out(server, api, scripted, chat, sockets):
    scripted.enqueue(Scenario().keep_alive(0.05))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Hello?")
    events = ws.events_until("turn_end")
    error = of_type(events, "error")[0]["data"]
    assert error["code"] == "provider_timeout"
    assert api.history(chat["id"])[-1]["meta"]["error"]["code"] == "provider_timeout"


def test_stop_during_an_approval_wait_records_stopped_not_denied(server, api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"tools": ["guarded"]})
    scripted.enqueue(Scenario().tool_call("guarded", {"label": "x"}))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Needs approval")
    ws.events_until("tool_approval")
    ws.send(type="stop")
    events = ws.events_until("turn_end")
    assert of_type(events, "tool_end")[0]["data"]["ok"] is False
    result = api.history(chat["id"])[-1]
    assert result["role"] == "tool"
    assert "stopped" in result["content"] and "denied" not in result["content"]


def test_a_used_request_id_with_other_text_is_refused(server, api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    ws.send(type="send", message="First text", request_id="used-once")
    assert "done" in types(ws.events_until("turn_end"))
    before = api.history(chat["id"])

    ws.send(type="send", message="Different text", request_id="used-once")
    error = ws.events_until("error")[-1]  # (a title_update of the first turn may come first)
    assert error["data"]["code"] == "request_id_reused"
    status, body = api.post(
        "/api/chat_stream",
        {"session": chat["id"], "message": "Different text", "request_id": "used-once"},
    )
    assert status == 409 and body["error"]["code"] == "request_id_reused"
    assert api.history(chat["id"]) == before
    # the same text is still a retry that answers with the saved answer
    ws.send(type="send", message="First text", request_id="used-once")
    again = ws.events_until("turn_end")
    assert of_type(again, "done")[0]["data"]["message_id"] == before[-1]["id"]


def test_snapshot_carries_the_history_boundary(server, api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    ws.send(type="send", message="One")
    ws.events_until("turn_end")
    boundary = api.history(chat["id"])[-1]["id"]
    scripted.enqueue(Scenario().text("held", chunks=1).stall())
    ws.send(type="send", message="Two")
    ws.events_until("content")
    late = sockets(chat["id"])
    late.send(type="resume")
    snapshot = late.receive()
    assert snapshot["type"] == "snapshot"
    assert snapshot["data"]["history_boundary"] == boundary
    scripted.release()
    ws.events_until("turn_end")


@pytest.mark.parametrize("last_event_id", [None, "1"], ids=["no-id", "older-than-the-buffer"])
def test_resuming_a_finished_turn_by_sse_sends_the_snapshot_and_ends(
    server, api, scripted, chat, sockets, last_event_id
):
    ws = sockets(chat["id"])
    ws.send(type="send", message="Finish")
    ws.events_until("turn_end")
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    stream = SSE(server, "GET", f"/api/chat/resume/{chat['id']}", headers=headers)
    try:
        assert stream.response.status == 200
        events = list(stream.events())  # returns only when the server ends the stream
    finally:
        stream.close()
    assert [e["type"] for e in events] == ["snapshot"]
    assert events[0]["data"]["finished"] is True


def test_chat_stream_with_a_deleted_selected_endpoint_repairs_the_route(
    server, api, scripted, chat
):
    status, gone = api.post(
        "/api/endpoints",
        {
            "name": "soon gone",
            "kind": "openai_chat",
            "base_url": scripted.openai_base_url,
            "default_model": "x",
        },
    )
    assert status == 201
    assert api.call("DELETE", f"/api/endpoints/{gone['id']}")[0] == 200
    scripted.enqueue(Scenario().text("Answered on a valid route."))
    stream = SSE(
        server,
        "POST",
        "/api/chat_stream",
        {
            "session": chat["id"],
            "message": "hello",
            "selected_endpoint_id": str(gone["id"]),
            "model": "x",
        },
    )
    try:
        assert stream.response.status == 200
        events = list(stream.events())
    finally:
        stream.close()
    assert "done" in types(events) and "error" not in types(events)
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "Answered on a valid route."
    assert (
        answer["meta"]["endpoint_id"] == chat["endpoint"]["id"]
        and answer["meta"]["model"] == "fake-model"
    )
    status, body = api.post(
        "/api/chat_stream", {"session": chat["id"], "message": "x", "selected_endpoint_id": "²"}
    )
    assert status == 400 and body["error"]["code"] == "invalid_input"
