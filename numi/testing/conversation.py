"""Reading a recorded request body the same way for all three protocols: what the user
said last, whether the request continues after a tool result, which tools are offered.
Used by the default and demo scenarios."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tail:
    """The end of a conversation as a request carries it."""

    user_text: str = ""  # the last user message's text
    tool_output: str | None = None  # set when the last input is a tool result
    tool_names: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def conversation_tail(protocol: str | None, body: Any) -> Tail:
    """Summarise the end of a request body (Chat, Responses or Anthropic shape)."""
    tail = Tail()
    if not isinstance(body, dict):
        return tail
    for tool in body.get("tools") or ():
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            tail.tool_names.append(name)
    if protocol == "openai_responses":
        items = body.get("input")
        if isinstance(items, str):
            tail.user_text = items
            return tail
        for item in items or ():
            if item.get("type") == "function_call_output":
                tail.tool_output = str(item.get("output"))
            elif item.get("role") == "user":
                tail.user_text, tail.tool_output = _text(item.get("content")), None
            elif item.get("type") in ("message", "function_call"):
                tail.tool_output = None
        return tail
    for message in body.get("messages") or ():
        role, content = message.get("role"), message.get("content")
        if role == "tool":
            tail.tool_output = _text(content)
        elif (
            role == "user"
            and isinstance(content, list)
            and any(
                isinstance(part, dict) and part.get("type") == "tool_result" for part in content
            )
        ):
            results = [part for part in content if part.get("type") == "tool_result"]
            tail.tool_output = _text(results[-1].get("content"))
        elif role == "user":
            tail.user_text, tail.tool_output = _text(content), None
        else:
            tail.tool_output = None
    return tail


def last_user_text(protocol: str | None, body: Any) -> str:
    return conversation_tail(protocol, body).user_text
