"""Small helpers shared by the provider tests (a uniquely named module: tests run in
pytest's default import mode, without packages)."""

from __future__ import annotations

from typing import Any

from numi.providers import ChatRequest

KINDS = ["openai_chat", "openai_responses", "anthropic"]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def request(*messages: dict[str, Any], **settings: Any) -> ChatRequest:
    settings.setdefault("model", "scripted-model")
    return ChatRequest(messages=list(messages) or [user("hi")], **settings)


def of_type(events: list[Any], cls: type) -> list[Any]:
    return [event for event in events if isinstance(event, cls)]


def joined(events: list[Any], cls: type) -> str:
    return "".join(event.text for event in of_type(events, cls))


def assistant_message(events: list[Any]) -> dict[str, Any]:
    """The assistant message an agent stores after a step, built from its events the way
    numi.agent does: text, reasoning text, the Finish reasoning envelope, tool calls."""
    from numi.providers import Finish, ReasoningDelta, TextDelta, ToolCallComplete

    message: dict[str, Any] = {"role": "assistant", "content": joined(events, TextDelta)}
    reasoning = joined(events, ReasoningDelta)
    if reasoning:
        message["reasoning_content"] = reasoning
    finish = events[-1]
    if isinstance(finish, Finish) and finish.reasoning_details:
        message["reasoning_details"] = finish.reasoning_details
    calls = of_type(events, ToolCallComplete)
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json},
            }
            for c in calls
        ]
    return message


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}
