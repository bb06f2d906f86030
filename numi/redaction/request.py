"""A whole `ChatRequest` through the rules, and a provider's events restored.

Every text the request carries is redacted, whatever part of Numi put it there: the system
context (the chat's prompt, project instructions, memories, document passages), every
message's text and attached documents, the arguments of earlier tool calls, tool results
and reasoning sent back as text. Images, tool schemas and signed reasoning blocks (which
came from the model, placeholders and all, and must stay byte-identical) pass as they are.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..providers.events import ChatRequest, ReasoningDelta, StreamEvent, TextDelta, ToolCallComplete
from .placeholders import Placeholders, redact_text
from .restore import Restorer, restore_json, restore_value
from .rules import RedactionRules


@dataclass
class Redacted:
    """The request as it leaves, and how many items each label replaced in it."""

    request: ChatRequest
    counts: Counter[str]


def redact_request(
    request: ChatRequest,
    rules: RedactionRules,
    placeholders: Placeholders,
    exempt: frozenset[str] = frozenset(),
) -> Redacted:
    """A copy of `request` with every text redacted (the original is left as it is), but
    for the values in `exempt` (`exempt_keys`: what the user let through this once)."""
    counts: Counter[str] = Counter()

    def text(value: str) -> str:
        return redact_text(value, rules, placeholders, counts, exempt)

    # The system context first: its values get the low numbers, request after request.
    system = text(request.system) if request.system else request.system
    messages = [_message(message, text) for message in request.messages]
    return Redacted(dataclasses.replace(request, messages=messages, system=system), counts)


def _message(message: dict[str, Any], text) -> dict[str, Any]:
    out = dict(message)
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = text(content)
    elif isinstance(content, list):
        out["content"] = [_part(part, text) for part in content]
    if isinstance(message.get("reasoning_content"), str):
        out["reasoning_content"] = text(message["reasoning_content"])
    if message.get("tool_calls"):
        out["tool_calls"] = [_call(call, text) for call in message["tool_calls"]]
    return out


def _part(part: Any, text) -> Any:
    if isinstance(part, str):
        return text(part)
    if not isinstance(part, dict) or part.get("type") not in ("text", "document"):
        return part
    out = dict(part)
    if isinstance(part.get("text"), str):
        out["text"] = text(part["text"])
    if isinstance(part.get("name"), str):
        out["name"] = text(part["name"])
    return out


def _call(call: dict[str, Any], text) -> dict[str, Any]:
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    arguments = function["arguments"]
    redacted = text(arguments)
    try:
        json.loads(redacted)
    except ValueError:
        # A rule's match reached across the JSON's quotes: redact the values one by one.
        try:
            redacted = json.dumps(_value(json.loads(arguments), text), ensure_ascii=False)
        except ValueError:
            pass  # the model's own broken arguments: sent as redacted text
    return {**call, "function": {**function, "arguments": redacted}}


def _value(value: Any, text) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [_value(item, text) for item in value]
    if isinstance(value, dict):
        return {key: _value(item, text) for key, item in value.items()}
    return value


def restored_events(events: Iterable[StreamEvent], values: dict[str, str]) -> Iterator[StreamEvent]:
    """The provider's events with placeholders restored in the answer's text, its
    reasoning and its tool calls' arguments. A placeholder split across chunks is held
    back until it is whole; what is held at the end is let out before the final event."""
    content, reasoning = Restorer(values), Restorer(values)
    for event in events:
        if isinstance(event, TextDelta):
            restored = content.feed(event.text)
            if restored:
                yield TextDelta(restored) if restored is not event.text else event
            continue
        if isinstance(event, ReasoningDelta):
            restored = reasoning.feed(event.text)
            if restored:
                yield ReasoningDelta(restored) if restored is not event.text else event
            continue
        if not isinstance(event, ToolCallComplete):
            # Anything but a delta: what was held is whole now (or never will be).
            yield from _flushed(content, reasoning)
            yield event
            continue
        yield from _flushed(content, reasoning)
        arguments_json = restore_json(event.arguments_json, values)
        arguments = event.arguments
        if arguments is not None and arguments_json is not event.arguments_json:
            arguments = restore_value(arguments, content)
        yield dataclasses.replace(event, arguments=arguments, arguments_json=arguments_json)
    yield from _flushed(content, reasoning)


def _flushed(content: Restorer, reasoning: Restorer) -> Iterator[StreamEvent]:
    held = reasoning.flush()
    if held:
        yield ReasoningDelta(held)
    held = content.flush()
    if held:
        yield TextDelta(held)


class RestoringStream:
    """A provider stream whose events come out restored (`restored_events`); `close`
    closes the provider's stream, from any greenlet, as the stream's own does."""

    def __init__(self, stream: Any, values: dict[str, str]):
        self.stream = stream
        self._events = restored_events(stream, values)

    def __iter__(self) -> RestoringStream:
        return self

    def __next__(self) -> StreamEvent:
        return next(self._events)

    def close(self) -> None:
        self.stream.close()

    cancel = close
