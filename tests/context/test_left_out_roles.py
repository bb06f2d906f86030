"""A question left out of the context in the middle of a chat: its answer stays, opened by
a placeholder question, so the request's roles still alternate on every protocol (Anthropic
refuses two assistant messages in a row). A live server, the scripted provider through the
real SDKs, real WebSocket clients."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import make_chat, of_type
from server_wait import WAIT_SECONDS

PROTOCOLS = ["openai_chat", "openai_responses", "anthropic"]


def conversation_roles(protocol: str, body: dict) -> list[str]:
    """The user and assistant roles of a request, in order (system text aside)."""
    items = body["input"] if protocol == "openai_responses" else body["messages"]
    return [item["role"] for item in items if item.get("role") in ("user", "assistant")]


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_question_left_out_in_the_middle_keeps_the_roles_alternating(
    api, scripted, sockets, kind
):
    chat = make_chat(api, scripted, kind=kind)
    scripted.enqueue(*(Scenario().text(f"Answer {n}.") for n in (1, 2, 3, 4)))
    for question in ("first question", "the walrus question", "third question"):
        ws = sockets(chat["id"])
        ws.send(type="send", message=question)
        assert of_type(ws.events_until("turn_end", timeout=WAIT_SECONDS), "done")
    middle = next(m for m in api.history(chat["id"]) if m["content"] == "the walrus question")
    status, _ = api.call(
        "PATCH", f"/api/session/{chat['id']}/messages/{middle['id']}", {"in_context": False}
    )
    assert status == 200

    ws = sockets(chat["id"])
    ws.send(type="send", message="what now?")
    assert of_type(ws.events_until("turn_end", timeout=WAIT_SECONDS), "done")
    body = next(r.body for r in reversed(scripted.requests) if "what now?" in str(r.body))
    roles = conversation_roles(kind, body)
    assert roles == ["user", "assistant"] * 3 + ["user"], roles
    text = str(body)
    # The left-out question is not sent; its answer is, after the placeholder question.
    assert "walrus" not in text and "Answer 2." in text
    assert "left out of the context by the user" in text
