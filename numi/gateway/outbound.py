"""Neutral events written back in the client's protocol: SSE frames while streaming,
one JSON body otherwise (PROTOCOLS §1 and §3 are the shapes; the official SDKs parse
them). `model` is always the name of the route that answered (`<endpoint>/<model>`).

Tool calls are renumbered from 0 in the order they start: an Anthropic endpoint numbers
them by content block, a Chat Completions client expects 0, 1, 2.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Generator, Iterator
from typing import Any

from ..providers.events import (
    Finish,
    ReasoningDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from .errors import anthropic_error, openai_error, provider_status
from .relay import Answer

_OPENAI_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    return f"{head}data: {text}\n\n".encode()


def _arguments(call: ToolCallComplete) -> str:
    return call.arguments_json or "{}"


def _input(call: ToolCallComplete) -> dict[str, Any]:
    return call.arguments if isinstance(call.arguments, dict) else {}


class _Indexes:
    """Tool calls numbered 0, 1, 2 in the order they start, whatever the provider's index."""

    def __init__(self) -> None:
        self.by_provider: dict[int, int] = {}
        self.ids: dict[int, str] = {}

    def of(self, index: int) -> tuple[int, bool]:
        """(our index, whether this is the call's first appearance)."""
        if index in self.by_provider:
            return self.by_provider[index], False
        self.by_provider[index] = len(self.by_provider)
        return self.by_provider[index], True

    def call_id(self, index: int, given: str | None) -> str:
        return self.ids.setdefault(index, given or "call_" + secrets.token_hex(12))


# --- OpenAI Chat Completions ------------------------------------------------------------------


_MARK = "\ue000numi-text\ue000"  # a private-use marker: no model name holds it
_MARK_JSON = json.dumps(_MARK, ensure_ascii=False).encode()


class ChatCompletionsWriter:
    """Chat Completions chunks (`data:` only, ended by `[DONE]`), or one completion."""

    def __init__(self, model: str, include_usage: bool = False):
        self.model = model
        self.include_usage = include_usage
        self.id = "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())
        # A text chunk is the same bytes each time but for its text: the frame's JSON is
        # written once around a marker, and each token's frame is its text's JSON between
        # the two halves (what _chunk would write, without encoding the whole dict again).
        head, _, tail = self._chunk({"content": _MARK}).rpartition(_MARK_JSON)
        self._text_frame = (head, tail)

    def _text_chunk(self, text: str) -> bytes:
        head, tail = self._text_frame
        return b"".join((head, json.dumps(text, ensure_ascii=False).encode(), tail))

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
        )

    def frames(self, events: Iterator[StreamEvent]) -> Iterator[bytes]:
        """The SSE frames of a streamed answer."""
        yield self._chunk({"role": "assistant", "content": ""})
        indexes = _Indexes()
        usage: Usage | None = None
        for event in events:
            if isinstance(event, TextDelta):
                yield self._text_chunk(event.text)
            elif isinstance(event, ReasoningDelta):
                if event.text:
                    yield self._chunk({"reasoning_content": event.text})
            elif isinstance(event, ToolCallDelta):
                index, first = indexes.of(event.index)
                entry: dict[str, Any] = {"index": index}
                if first:
                    entry.update(
                        id=indexes.call_id(event.index, event.id),
                        type="function",
                        function={"name": event.name or "", "arguments": event.arguments_fragment},
                    )
                else:
                    entry["function"] = {"arguments": event.arguments_fragment}
                yield self._chunk({"tool_calls": [entry]})
            elif isinstance(event, ToolCallComplete):
                index, first = indexes.of(event.index)
                if first:  # a provider that sent the call whole
                    call = {
                        "index": index,
                        "id": indexes.call_id(event.index, event.id),
                        "type": "function",
                        "function": {"name": event.name, "arguments": _arguments(event)},
                    }
                    yield self._chunk({"tool_calls": [call]})
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                yield self._chunk({}, _OPENAI_FINISH.get(event.reason, "stop"))
                if self.include_usage:
                    yield _sse(
                        {
                            "id": self.id,
                            "object": "chat.completion.chunk",
                            "created": self.created,
                            "model": self.model,
                            "choices": [],
                            "usage": openai_usage(usage),
                        }
                    )
                yield _sse("[DONE]")
                return
            elif isinstance(event, StreamError):
                yield self.error_frame(event)
                return

    def error_frame(self, error: StreamError) -> bytes:
        """A failure after the stream began (the SDK raises APIError on it)."""
        return _sse(openai_error(error.code, error.message, provider_status(error.code)))

    def body(self, answer: Answer) -> dict[str, Any]:
        """The whole completion of a non-streaming request."""
        message: dict[str, Any] = {"role": "assistant", "content": answer.content or None}
        if answer.reasoning:
            message["reasoning_content"] = "".join(answer.reasoning)
        if answer.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call)},
                }
                for call in answer.tool_calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _OPENAI_FINISH.get(answer.finish_reason, "stop"),
                }
            ],
            "usage": openai_usage(answer.usage),
        }


def openai_usage(usage: Usage | None) -> dict[str, Any]:
    prompt = (usage.input_tokens if usage else None) or 0
    completion = (usage.output_tokens if usage else None) or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": (usage.cached_input_tokens if usage else None) or 0
        },
        "completion_tokens_details": {
            "reasoning_tokens": (usage.reasoning_tokens if usage else None) or 0
        },
    }


# --- Anthropic Messages -----------------------------------------------------------------------


class MessagesWriter:
    """Anthropic Messages events (each with its `event:` line), or one message."""

    def __init__(self, model: str):
        self.model = model
        self.id = "msg_" + secrets.token_hex(12)

    def frames(self, events: Iterator[StreamEvent]) -> Iterator[bytes]:
        """The SSE frames of a streamed answer."""
        yield _sse(
            {
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
            "message_start",
        )
        block = -1  # the index of the open block
        open_kind: str | None = None
        indexes = _Indexes()
        usage: Usage | None = None

        def start(kind: str, content_block: dict[str, Any]) -> Iterator[bytes]:
            nonlocal block, open_kind
            yield from stop()
            block += 1
            open_kind = kind
            yield _sse(
                {"type": "content_block_start", "index": block, "content_block": content_block},
                "content_block_start",
            )

        def stop() -> Iterator[bytes]:
            nonlocal open_kind
            if open_kind is not None:
                yield _sse({"type": "content_block_stop", "index": block}, "content_block_stop")
                open_kind = None

        def delta(body: dict[str, Any]) -> bytes:
            return _sse(
                {"type": "content_block_delta", "index": block, "delta": body},
                "content_block_delta",
            )

        def start_tool(event: ToolCallDelta | ToolCallComplete) -> Generator[bytes, None, bool]:
            """Opens the call's tool_use block the first time the call is seen; says whether
            this was that first time."""
            _index, first = indexes.of(event.index)
            if first:
                call_id = indexes.call_id(event.index, event.id)
                yield from start(
                    "tool_use",
                    {"type": "tool_use", "id": call_id, "name": event.name or "", "input": {}},
                )
            return first

        for event in events:
            if isinstance(event, TextDelta):
                if open_kind != "text":
                    yield from start("text", {"type": "text", "text": ""})
                yield delta({"type": "text_delta", "text": event.text})
            elif isinstance(event, ReasoningDelta):
                if event.signature is not None:
                    # The block's signature, just before its stop, as Anthropic sends it: a
                    # client can send the signed block back in a tool loop.
                    if open_kind == "thinking":
                        yield delta({"type": "signature_delta", "signature": event.signature})
                        yield from stop()
                    continue
                if open_kind != "thinking":
                    yield from start(
                        "thinking", {"type": "thinking", "thinking": "", "signature": ""}
                    )
                yield delta({"type": "thinking_delta", "thinking": event.text})
            elif isinstance(event, ToolCallDelta):
                yield from start_tool(event)
                if event.arguments_fragment:
                    yield delta(
                        {"type": "input_json_delta", "partial_json": event.arguments_fragment}
                    )
            elif isinstance(event, ToolCallComplete):
                if (yield from start_tool(event)):
                    yield delta({"type": "input_json_delta", "partial_json": _arguments(event)})
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                yield from stop()
                yield _sse(
                    {
                        "type": "message_delta",
                        "delta": {
                            "stop_reason": _ANTHROPIC_STOP.get(event.reason, "end_turn"),
                            "stop_sequence": None,
                        },
                        "usage": anthropic_usage(usage),
                    },
                    "message_delta",
                )
                yield _sse({"type": "message_stop"}, "message_stop")
                return
            elif isinstance(event, StreamError):
                yield self.error_frame(event)
                return

    def error_frame(self, error: StreamError) -> bytes:
        return _sse(
            anthropic_error(error.code, error.message, provider_status(error.code)), "error"
        )

    def body(self, answer: Answer) -> dict[str, Any]:
        """The whole message of a non-streaming request."""
        content: list[dict[str, Any]] = []
        envelope = answer.finish.reasoning_details if answer.finish else None
        if isinstance(envelope, dict) and envelope.get("format") == "anthropic":
            content.extend(dict(item) for item in envelope.get("items") or ())
        elif answer.reasoning:
            content.append(
                {"type": "thinking", "thinking": "".join(answer.reasoning), "signature": ""}
            )
        if answer.content:
            content.append({"type": "text", "text": answer.content})
        content.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)}
            for call in answer.tool_calls
        )
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": _ANTHROPIC_STOP.get(answer.finish_reason, "end_turn"),
            "stop_sequence": None,
            "usage": anthropic_usage(answer.usage),
        }


def anthropic_usage(usage: Usage | None) -> dict[str, Any]:
    return {
        "input_tokens": (usage.input_tokens if usage else None) or 0,
        "output_tokens": (usage.output_tokens if usage else None) or 0,
    }
