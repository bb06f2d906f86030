"""A temporary chat uses no memory and writes none, as ChatGPT's temporary chats do: its
requests (as the scripted provider received them) carry no memory and no `remember` tool,
a `remember` the model calls anyway writes nothing, and the context panel agrees. A normal
chat of the same user beside it still gets both."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env

MEMORY = "Keeps bees near Bramley."


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def ask(server, chat_id: str) -> list[dict]:
    socket = Socket(server, chat_id)
    try:
        socket.send(type="send", message="What do you know about me?")
        return socket.events_until("turn_end", timeout=60)
    finally:
        socket.close()


def offered(body: dict) -> tuple[str, list[str]]:
    """The system prompt and the tool names of an OpenAI chat request."""
    system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    return system, [t["function"]["name"] for t in body.get("tools") or ()]


def test_a_temporary_chat_uses_no_memory_and_offers_no_remember(server, scripted):
    api = Api(server.url, token=server.token)
    api.call("PATCH", "/api/preferences", {"memory": True})
    status, _ = api.post("/api/memories", {"text": MEMORY})
    assert status == 201
    settings = {"tools": ["remember", "current_time"]}
    normal = make_chat(api, scripted, settings=settings)
    status, temporary = api.post(
        "/api/session",
        {
            "endpoint_id": normal["endpoint"]["id"],
            "model": "fake-model",
            "settings": settings,
            "temporary": True,
        },
    )
    assert status == 201 and temporary["temporary"] is True

    scripted.enqueue(Scenario().text("You keep bees."))
    ask(server, normal["id"])
    system, tools = offered(scripted.last_request.body)
    assert MEMORY in system and "remember" in tools  # memory is on: a normal chat has it

    scripted.enqueue(Scenario().text("I know nothing of you here."))
    ask(server, temporary["id"])
    system, tools = offered(scripted.last_request.body)
    assert MEMORY not in system
    assert "remember" not in tools and "current_time" in tools

    # A model that calls `remember` anyway finds no such tool, and nothing is written.
    scripted.enqueue(Scenario().tool_call("remember", {"text": "Likes secrets."}))
    scripted.enqueue(Scenario().text("Not kept."))
    events = ask(server, temporary["id"])
    assert not of_type(events, "tool_approval")
    [end] = [e["data"] for e in of_type(events, "tool_end")]
    assert not end["ok"]
    _, kept = api.get("/api/memories?project_id=all")
    assert [m["text"] for m in kept["memories"]] == [MEMORY]

    # What the context panel shows is what the model gets.
    _, context = api.get(f"/api/session/{temporary['id']}/context")
    parts = {p["kind"]: p for p in context["parts"]}
    assert MEMORY not in parts["memories"]["text"]
    assert [t["name"] for t in parts["tools"]["items"]] == ["current_time"]
    api.call("PATCH", "/api/preferences", {"memory": False})
