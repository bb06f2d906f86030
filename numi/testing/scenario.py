"""Scenarios: what the scripted provider answers to one request.

A scenario is protocol-neutral: it says "reason, then write this text in 4 chunks, then
call two tools", and the server renders it as Chat Completions chunks, Responses events
or Anthropic events depending on the path the request came in on.

    Scenario().reasoning("Let me think.", chunks=2).text("Hello there", chunks=3)
    Scenario().tool_call("get_weather", {"city": "Paris"}, fragments=3).usage(12, 30)
    Scenario().text("Part").drop()                      # connection dies mid-stream
    Scenario().hold_headers().text("Late")              # no status line until released
    Scenario.http_error(429, retry_after=0)             # pre-stream error, real body shape

Builders return the scenario so calls chain. The finish reason defaults to "tool_calls"
when the scenario has tool calls, else "stop".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Text:
    text: str
    chunks: int = 1


@dataclass(frozen=True)
class Reasoning:
    """Reasoning in each provider's flavour: Anthropic thinking with `signature`,
    Responses summary with `encrypted` content, and for Chat Completions the delta field
    named by `chat_field`: "reasoning_content" (DeepSeek, llama.cpp), "reasoning"
    (Ollama, vLLM), "openrouter" (`reasoning` + `reasoning_details` with a signature),
    or "think_tag" (`<think>…</think>` inside content)."""

    text: str
    chunks: int = 1
    signature: str = "sig-EqQBCkgIAhABGAIiQ"
    encrypted: str = "gAAAAB-encrypted-reasoning"
    chat_field: str = "reasoning_content"


@dataclass(frozen=True)
class RedactedThinking:
    """Anthropic only: a redacted_thinking block (other protocols skip it)."""

    data: str = "EmwKAhgBEgy-redacted"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, sent as is: may be deliberately invalid
    id: str
    fragments: int = 2


@dataclass(frozen=True)
class ErrorEvent:
    """An error event inside the 200 stream, in the protocol's real shape."""

    kind: str = "overloaded"  # overloaded | server | rate_limit | context_length
    message: str | None = None


@dataclass(frozen=True)
class Drop:
    """Close the connection abruptly, without ending the HTTP body."""


@dataclass(frozen=True)
class Stall:
    """Send nothing until ScriptedProvider.release() or the client goes away; with
    `keepalive`, an SSE comment every that many seconds meanwhile (data that is no event)."""

    keepalive: float | None = None


@dataclass(frozen=True)
class Pause:
    seconds: float


Step = Text | Reasoning | RedactedThinking | ToolCall | ErrorEvent | Drop | Stall | Pause

# Real error bodies of OpenAI-compatible servers (PROTOCOLS §4.4), for http_error(body=...).
LLAMA_CPP_CONTEXT_ERROR = {
    "error": {
        "code": 400,
        "message": "request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 13392,
        "n_ctx": 8192,
    }
}
VLLM_CONTEXT_ERROR = {
    "object": "error",
    "message": "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}

_STATUS_KINDS = {
    400: "bad_request",
    401: "auth",
    403: "auth",
    404: "model_not_found",
    429: "rate_limit",
    529: "overloaded",
    503: "overloaded",
}


@dataclass(frozen=True)
class HttpError:
    status: int
    kind: str
    message: str | None = None
    retry_after: float | None = None
    body: Any = None  # a raw body (dict, str, or recorded JSON bytes) instead of the protocol's
    headers: dict[str, str] | None = None  # extra response headers, as a server sent them


@dataclass
class Scenario:
    """One scripted answer. Build with the chaining methods below."""

    steps: list[Step] = field(default_factory=list)
    finish_reason: str | None = None  # neutral: stop | length | tool_calls | content_filter
    raw_finish_reason: str | None = None  # the wire value, overriding the neutral one
    usage_tokens: tuple[int | None, int, int] | None = (
        None  # input (None: counted), output, reasoning
    )
    chunk_delay: float = 0.0  # seconds before each delta frame
    # Anthropic's prompt cache (read, written, uncached) tokens, set by the server when the
    # request has cache_control breakpoints (numi/testing/prompt_cache.py).
    cache_usage: tuple[int, int, int] | None = None
    error: HttpError | None = None
    response_model: str | None = None  # model name in frames; default: the request's
    # A recorded stream replayed byte for byte instead of rendering the steps: SSE
    # frames (bytes) as a real server sent them (numi/testing/recordings.py).
    recorded: list[bytes] | None = None
    # Send no status line or headers until ScriptedProvider.release() or the client goes
    # away: a server that took the request and never answers it.
    headers_held: bool = False

    # --- builders ---------------------------------------------------------------------

    def text(self, text: str, chunks: int = 1) -> Scenario:
        self.steps.append(Text(text, max(1, chunks)))
        return self

    def reasoning(self, text: str, chunks: int = 1, **flavour: str) -> Scenario:
        """Reasoning text; `flavour` may set signature, encrypted, chat_field."""
        self.steps.append(Reasoning(text, max(1, chunks), **flavour))
        return self

    def redacted_thinking(self, data: str = "EmwKAhgBEgy-redacted") -> Scenario:
        self.steps.append(RedactedThinking(data))
        return self

    def tool_call(
        self, name: str, arguments: dict | str = "{}", *, id: str | None = None, fragments: int = 2
    ) -> Scenario:
        """A tool call; `arguments` as a dict, or as raw (possibly invalid) JSON text.
        Several calls in one scenario are parallel calls."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        count = sum(isinstance(step, ToolCall) for step in self.steps)
        self.steps.append(ToolCall(name, raw, id or f"call_{count + 1}", max(1, fragments)))
        return self

    def finish(self, reason: str, raw: str | None = None) -> Scenario:
        self.finish_reason, self.raw_finish_reason = reason, raw
        return self

    def usage(
        self, input_tokens: int | None, output_tokens: int, reasoning_tokens: int = 0
    ) -> Scenario:
        """Report usage; `input_tokens` None: the server's tokenizer counts the request
        (numi.testing.tokens)."""
        self.usage_tokens = (input_tokens, output_tokens, reasoning_tokens)
        return self

    def error_event(self, kind: str = "overloaded", message: str | None = None) -> Scenario:
        self.steps.append(ErrorEvent(kind, message))
        return self

    def drop(self) -> Scenario:
        self.steps.append(Drop())
        return self

    def stall(self) -> Scenario:
        self.steps.append(Stall())
        return self

    def hold_headers(self) -> Scenario:
        """Answer nothing, not even the status line, until released."""
        self.headers_held = True
        return self

    def keep_alive(self, interval: float = 0.05) -> Scenario:
        """Stall, sending only `: keep-alive` comments every `interval` seconds."""
        self.steps.append(Stall(keepalive=interval))
        return self

    def pause(self, seconds: float) -> Scenario:
        self.steps.append(Pause(seconds))
        return self

    def delay(self, seconds_per_chunk: float) -> Scenario:
        self.chunk_delay = seconds_per_chunk
        return self

    def tokens_per_second(self, rate: float) -> Scenario:
        self.chunk_delay = 1.0 / rate if rate > 0 else 0.0
        return self

    @classmethod
    def http_error(
        cls,
        status: int,
        kind: str | None = None,
        *,
        message: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Scenario:
        """Answer with an HTTP error before any stream. `kind` picks the real body shape
        (auth, bad_request, context_length, model_not_found, rate_limit, server,
        overloaded); by default it follows the status."""
        kind = kind or _STATUS_KINDS.get(status, "server")
        return cls(error=HttpError(status, kind, message, retry_after, body, headers))

    @classmethod
    def replay(cls, frames: list[bytes]) -> Scenario:
        """Answer with a recorded stream, byte for byte (the SSE frames a real server
        sent), whatever protocol was asked."""
        return cls(recorded=list(frames))

    # --- reading ----------------------------------------------------------------------

    @property
    def has_tool_calls(self) -> bool:
        return any(isinstance(step, ToolCall) for step in self.steps)

    def neutral_finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.has_tool_calls else "stop")


def split(text: str, parts: int) -> list[str]:
    """`text` in `parts` pieces of nearly equal length (never empty pieces)."""
    parts = max(1, min(parts, len(text))) if text else 1
    size, extra = divmod(len(text), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces
