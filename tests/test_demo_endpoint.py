"""The demo endpoint exists only while `numi serve --demo` runs, and its canned answer says
how to turn on a tool it was asked to call (issue 24). Real `numi serve` processes and the
scripted provider they run, no mocks."""

from __future__ import annotations

import signal

import pytest
from turn_support import SSE, Api, types

DEMO = "Demo (scripted)"


def _ask(server, chat_id: str, message: str) -> list[dict]:
    stream = SSE(server, "POST", "/api/chat_stream", {"session": chat_id, "message": message})
    try:
        return list(stream.events())
    finally:
        stream.close()


def _endpoint_names(api: Api) -> list[str]:
    status, body = api.get("/api/endpoints")
    assert status == 200, body
    return [e["name"] for e in body["endpoints"]]


@pytest.mark.timeout(300)  # three starts of `numi serve`: slow on a busy machine
def test_the_demo_endpoint_is_gone_after_the_demo_and_back_with_the_next(live_server_factory):
    server = live_server_factory(serve_args=("--demo",))
    api = Api(server.url, token=server.token)
    status, body = api.get("/api/endpoints")
    demo = next(e for e in body["endpoints"] if e["name"] == DEMO)
    # Its whole list, fetched on start as for any endpoint added (issue 25 item 4).
    assert demo["models"] == ["scripted-model", "scripted-reasoning"]
    status, chat = api.post("/api/session", {})
    assert status == 201 and chat["endpoint_id"] == demo["id"], "the only endpoint: the default"
    assert "done" in types(_ask(server, chat["id"], "Hello"))

    # a demo stopped by SIGTERM removes its endpoint
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    assert DEMO not in server.cli("endpoint", "list").stdout
    # the next demo brings the same endpoint back, so the demo's chats answer again
    server.start()
    assert _endpoint_names(api).count(DEMO) == 1
    # Another port is another server: its list is fetched again, not left empty.
    back = next(e for e in api.get("/api/endpoints")[1]["endpoints"] if e["name"] == DEMO)
    assert back["models"] == ["scripted-model", "scripted-reasoning"]
    assert "done" in types(_ask(server, chat["id"], "Still there?"))
    # a demo killed outright leaves it behind until `make run` (no --demo) starts
    server.kill()
    assert DEMO in server.cli("endpoint", "list").stdout
    server.serve_args = ()
    server.start()
    assert DEMO not in _endpoint_names(api)
    status, other = api.post("/api/session", {})
    assert status == 201 and other["endpoint_id"] is None, "never the default"
    server.stop()


def test_a_tool_that_is_not_on_gets_an_answer_saying_how_to_turn_it_on(live_server_factory):
    server = live_server_factory(serve_args=("--demo",))
    api = Api(server.url, token=server.token)
    status, chat = api.post("/api/session", {})
    events = _ask(server, chat["id"], "What time is it? [tool:current_time]")
    assert "done" in types(events) and "tool_call" not in types(events)
    answer = api.history(chat["id"])[-1]["content"]
    assert "not on in this chat" in answer and "Settings" in answer and "Current time" in answer
    # as it says: turn the tool on, ask again, and the tool is called
    status, body = api.call("PATCH", f"/api/session/{chat['id']}", {"tools": ["current_time"]})
    assert status == 200, body
    events = _ask(server, chat["id"], "And now? [tool:current_time]")
    assert "done" in types(events)
    assert "The tool returned" in api.history(chat["id"])[-1]["content"]
    server.stop()


def test_a_demo_chat_is_titled_from_its_first_question(live_server_factory):
    """The title request goes through the real title path to the demo's scripted provider,
    which answers it with a title, not with its canned markdown answer."""
    server = live_server_factory(serve_args=("--demo",))
    api = Api(server.url, token=server.token)
    status, chat = api.post("/api/session", {})
    events = _ask(server, chat["id"], "what is the capital of France? [think]")
    titles = [e["data"]["title"] for e in events if e["type"] == "title_update"]
    assert titles == ["What is the capital of France"]
    status, sessions = api.get("/api/sessions")
    assert status == 200, sessions
    listed = next(s for s in sessions["sessions"] if s["id"] == chat["id"])
    assert listed["title"] == "What is the capital of France"
    server.stop()
