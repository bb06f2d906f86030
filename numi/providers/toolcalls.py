"""Assembling tool calls from streamed fragments.

Every protocol streams a tool call as a start (id, name) followed by argument fragments
that split JSON anywhere; parallel calls are told apart by a key (Chat Completions'
`tool_calls[].index`, a Responses `output_index`, an Anthropic block index).
`ToolCallAssembler` keys everything by it, numbers the calls 0, 1, 2… in order of
appearance (the neutral `index`), and parses the arguments only at the end.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from .events import ToolCallComplete, ToolCallDelta


@dataclass
class _PendingCall:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class ToolCallAssembler:
    """Collects fragments per index and yields complete, parsed calls."""

    def __init__(self) -> None:
        self._calls: dict[int, _PendingCall] = {}  # wire key -> call
        self._count = 0

    def _call(self, key: int) -> _PendingCall:
        if key not in self._calls:
            self._calls[key] = _PendingCall(index=self._count)
            self._count += 1
        return self._calls[key]

    def add(
        self, key: int, *, id: str | None = None, name: str | None = None, fragment: str = ""
    ) -> ToolCallDelta:
        """Record a fragment of the call with wire key `key`. The first id and name seen
        win: some OpenAI-compatible servers repeat them on every delta."""
        call = self._call(key)
        new_id = id if id and not call.id else None
        new_name = name if name and not call.name else None
        call.id = call.id or id or None
        call.name = call.name or name or None
        call.arguments += fragment or ""
        return ToolCallDelta(
            index=call.index, id=new_id, name=new_name, arguments_fragment=fragment or ""
        )

    def set_arguments(self, key: int, arguments: str) -> None:
        """Replace the arguments with the authoritative whole text (Responses `.done`)."""
        self._call(key).arguments = arguments

    def complete(self, key: int) -> ToolCallComplete | None:
        """Finish one call (Anthropic and Responses close calls one at a time)."""
        call = self._calls.pop(key, None)
        return _finish(call) if call else None

    def complete_all(self) -> list[ToolCallComplete]:
        """Finish every open call, in order of appearance."""
        done = [_finish(call) for call in sorted(self._calls.values(), key=lambda c: c.index)]
        self._calls.clear()
        return done

    @property
    def count(self) -> int:
        """How many calls were seen in this step."""
        return self._count


def parse_arguments(text: str) -> tuple[dict | None, str | None]:
    """(arguments, error): empty means no arguments; anything but a JSON object is an
    error the model gets to read, never an exception."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"The tool arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, "The tool arguments must be a JSON object"
    return value, None


def _finish(call: _PendingCall) -> ToolCallComplete:
    arguments, error = parse_arguments(call.arguments)
    # llama.cpp and some Ollama builds omit the call id; the next request must pair the
    # result with the call, so invent a stable one.
    call_id = call.id or f"call_{call.index}_{uuid.uuid4().hex[:12]}"
    return ToolCallComplete(
        index=call.index,
        id=call_id,
        name=call.name or "",
        arguments=arguments,
        arguments_json=call.arguments,
        arguments_error=error,
    )
