"""What the model receives (issue 21): the scripted provider records each request, and the
project's instructions and the memories reach it on all three wire protocols, in order
(chat prompt, project instructions, memories, clock); memory off sends none; another
project's memories never travel. The `remember` tool asks even under auto-approve, writes
exactly the text its card showed on a yes, and nothing on a no. Live `numi serve` on SQLite
and PostgreSQL."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, run_turn, turn_server_env


@pytest.fixture(scope="module")
def server(live_server_factory, module_database_url):
    started = live_server_factory(
        **turn_server_env(NUMI_DATABASE_URL=module_database_url, NUMI_APPROVAL_TIMEOUT_SECONDS="20")
    )
    yield started
    started.stop()


def system_of(kind: str, body: dict) -> str:
    """The system context as each protocol carries it."""
    if kind == "anthropic":
        system = body["system"]
        return system if isinstance(system, str) else "\n\n".join(b["text"] for b in system)
    if kind == "openai_responses":
        return body["instructions"]
    [first] = [m for m in body["messages"] if m["role"] == "system"]
    return first["content"]


def ask(server, chat_id: str, text: str = "hello") -> list[dict]:
    # Generous: a protocol's first request in the server loads its SDK (seconds under load).
    return run_turn(server, chat_id, text, timeout=60)


@pytest.mark.parametrize("kind", ["openai_chat", "openai_responses", "anthropic"])
def test_instructions_and_memories_reach_each_protocol(server, scripted, kind):
    """The system context as the provider received it: every part, in order."""
    api = Api(server.url)
    status, project = api.post(
        "/api/projects", {"name": f"Garden {kind}", "instructions": "Answer as a gardener."}
    )
    assert status == 201, project
    _, other = api.post("/api/projects", {"name": f"Other {kind}"})
    chat = make_chat(api, scripted, kind=kind, settings={"system_prompt": "Chat prompt here."})
    status, moved = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200 and moved["project_id"] == project["id"]
    api.post("/api/memories", {"text": f"User fact {kind}."})
    api.post("/api/memories", {"text": f"Project fact {kind}.", "project_id": project["id"]})
    api.post("/api/memories", {"text": f"Secret other {kind}.", "project_id": other["id"]})

    api.call("PATCH", "/api/preferences", {"memory": False})
    scripted.enqueue(Scenario().text("ok"))
    ask(server, chat["id"])
    off = system_of(kind, scripted.last_request.body)
    assert "Answer as a gardener." in off, "project instructions go whatever memory says"
    assert f"User fact {kind}." not in off and "Project fact" not in off, "memory is off"

    api.call("PATCH", "/api/preferences", {"memory": True})
    scripted.enqueue(Scenario().text("ok"))
    ask(server, chat["id"])
    system = system_of(kind, scripted.last_request.body)
    order = [
        system.index("Chat prompt here."),
        system.index("Answer as a gardener."),
        system.index(f"User fact {kind}."),
        system.index(f"Project fact {kind}."),
        system.index("Current date for the user"),
    ]
    assert order == sorted(order), system
    assert f"Secret other {kind}." not in system, "another project's memories stay there"
    api.call("PATCH", "/api/preferences", {"memory": False})


def remember_chat(server, scripted, **settings):
    api = Api(server.url)
    api.call("PATCH", "/api/preferences", {"memory": True})
    return api, make_chat(api, scripted, settings={"tools": ["remember"], **settings})


def memories(api) -> list[str]:
    _, body = api.get("/api/memories?project_id=all")
    return [m["text"] for m in body["memories"]]


def test_remember_asks_even_under_auto_approve_and_writes_the_shown_text(server, scripted):
    api, chat = remember_chat(server, scripted, auto_approve=True)
    before = memories(api)
    scripted.enqueue(Scenario().tool_call("remember", {"text": "Prefers tea over coffee."}))
    scripted.enqueue(Scenario().text("Noted."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="remember that I prefer tea")
        events = socket.events_until("tool_approval")
        [card] = [e["data"] for e in of_type(events, "tool_approval")]
        assert card["name"] == "remember"
        assert card["arguments"] == {"text": "Prefers tea over coffee."}
        assert memories(api) == before, "nothing is kept before the yes"
        socket.send(
            type="approve", call_id=card["call_id"], digest=card["digest"], decision="approve"
        )
        events += socket.events_until("turn_end")
    finally:
        socket.close()
    [end] = [e["data"] for e in of_type(events, "tool_end")]
    assert end["ok"], end
    assert memories(api) == before + ["Prefers tea over coffee."]


def test_a_denied_memory_writes_nothing(server, scripted):
    api, chat = remember_chat(server, scripted)
    before = memories(api)
    scripted.enqueue(Scenario().tool_call("remember", {"text": "Password is hunter2."}))
    scripted.enqueue(Scenario().text("Understood."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="hi")
        events = socket.events_until("tool_approval")
        [card] = [e["data"] for e in of_type(events, "tool_approval")]
        socket.send(type="approve", call_id=card["call_id"], decision="deny")
        events += socket.events_until("turn_end")
    finally:
        socket.close()
    [end] = [e["data"] for e in of_type(events, "tool_end")]
    assert not end["ok"] and end["error_code"] == "denied"
    assert memories(api) == before
    tool_result = [m for m in scripted.last_request.body["messages"] if m["role"] == "tool"]
    assert tool_result[-1]["content"] == "The user denied this call."


def test_remember_with_memory_off_or_a_bad_text_writes_nothing(server, scripted):
    api, chat = remember_chat(server, scripted)
    before = memories(api)
    for text, code, memory_on in (
        ("x" * 501, "invalid_memory", True),
        ("Fine.", "memory_off", False),
    ):
        api.call("PATCH", "/api/preferences", {"memory": memory_on})
        scripted.enqueue(Scenario().tool_call("remember", {"text": text}))
        scripted.enqueue(Scenario().text("ok"))
        socket = Socket(server, chat["id"])
        try:
            socket.send(type="send", message="hi")
            events = socket.events_until("tool_approval")
            [card] = [e["data"] for e in of_type(events, "tool_approval")]
            socket.send(
                type="approve", call_id=card["call_id"], digest=card["digest"], decision="approve"
            )
            events += socket.events_until("turn_end")
        finally:
            socket.close()
        [end] = [e["data"] for e in of_type(events, "tool_end")]
        assert not end["ok"] and end["error_code"] == code, end
        assert memories(api) == before
    api.call("PATCH", "/api/preferences", {"memory": False})


def test_remember_for_the_project_keeps_a_project_memory(server, scripted):
    api, chat = remember_chat(server, scripted)
    _, project = api.post("/api/projects", {"name": "Scoped"})
    api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    scripted.enqueue(Scenario().tool_call("remember", {"text": "Uses tabs.", "scope": "project"}))
    scripted.enqueue(Scenario().text("ok"))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="we use tabs here")
        events = socket.events_until("tool_approval", timeout=60)
        [card] = [e["data"] for e in of_type(events, "tool_approval")]
        socket.send(
            type="approve", call_id=card["call_id"], digest=card["digest"], decision="approve"
        )
        socket.events_until("turn_end")
    finally:
        socket.close()
    _, kept = api.get(f"/api/memories?project_id={project['id']}")
    assert [m["text"] for m in kept["memories"]] == ["Uses tabs."]
    assert "Uses tabs." not in [m["text"] for m in api.get("/api/memories")[1]["memories"]]
    api.call("PATCH", "/api/preferences", {"memory": False})


def test_context_lists_the_projects_parts(server, scripted):
    """GET /context shows the project's instructions and the memories as parts with their
    tokens and text: exactly the text the model then receives."""
    api = Api(server.url)
    _, project = api.post(
        "/api/projects", {"name": "Orchard", "instructions": "Name every apple variety."}
    )
    _, other = api.post("/api/projects", {"name": "Elsewhere"})
    chat = make_chat(api, scripted, settings={"system_prompt": "Chat prompt."})
    api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    api.post("/api/memories", {"text": "Lives near Bramley."})
    api.post("/api/memories", {"text": "The orchard has 40 trees.", "project_id": project["id"]})
    api.post("/api/memories", {"text": "Not for this chat.", "project_id": other["id"]})

    def parts() -> dict[str, dict]:
        status, context = api.get(f"/api/session/{chat['id']}/context")
        assert status == 200, context
        return {p["kind"]: p for p in context["parts"]}

    api.call("PATCH", "/api/preferences", {"memory": False})
    off = parts()
    assert "Name every apple variety." in off["project_instructions"]["text"]
    assert off["memories"] == {"kind": "memories", "tokens": 0, "text": ""}, "memory is off"

    api.call("PATCH", "/api/preferences", {"memory": True})
    try:
        shown = parts()
        instructions, memories = shown["project_instructions"], shown["memories"]
        assert "Orchard" in instructions["text"]
        assert instructions["tokens"] == len(instructions["text"]) // 4 > 0
        assert "Lives near Bramley." in memories["text"]
        assert "The orchard has 40 trees." in memories["text"]
        assert "Not for this chat." not in memories["text"]
        assert memories["tokens"] == len(memories["text"]) // 4 > 0
        scripted.enqueue(Scenario().text("ok"))
        ask(server, chat["id"])
        system = system_of("openai_chat", scripted.last_request.body)
        assert instructions["text"] in system and memories["text"] in system

        # Out of the project: no instructions, only the user's own memories.
        api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": None})
        loose = parts()
        assert loose["project_instructions"]["tokens"] == 0
        assert loose["project_instructions"]["text"] == ""
        assert "Lives near Bramley." in loose["memories"]["text"]
        assert "The orchard has 40 trees." not in loose["memories"]["text"]
    finally:
        api.call("PATCH", "/api/preferences", {"memory": False})
