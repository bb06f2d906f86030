"""Provider-neutral request and stream-event types.

Every adapter takes a `ChatRequest` and yields the events below; nothing above
`numi.providers` sees a wire format. The events are small frozen dataclasses so they are
cheap to create per token and safe to hand between greenlets.

A stream always ends with exactly one terminal event: `Finish` (the model stopped) or
`StreamError` (the provider failed, before or during the stream). A stream that the
caller cancels simply ends, with no terminal event.

Structured reasoning (signed Anthropic thinking blocks, Responses reasoning items with
encrypted content, OpenRouter `reasoning_details`, and which field a Chat Completions
server streamed its reasoning in) is returned once per step as `Finish.reasoning_details`:
an opaque envelope to store on the assistant message (`reasoning_details`) and hand back
through `prepare_messages()` on later requests. See `numi.agent.prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Neutral finish reasons. Adapters map their provider's vocabulary onto these and keep the
# provider's own value in `Finish.raw_reason`.
FINISH_REASONS = ("stop", "tool_calls", "length", "content_filter", "other")

# Values of the `format` key of a reasoning-details envelope.
REASONING_FORMATS = ("anthropic", "openai_responses", "openrouter", "openai_chat")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, description and JSON Schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass
class ChatRequest:
    """One model call, independent of the wire protocol.

    `messages` are the internal OpenAI-like dicts (see the package docstring of
    `numi.agent.prepare`); run them through `prepare_messages()` first. Settings left as
    None are not sent, so the provider's defaults apply.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = field(default_factory=list)
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None  # "low" | "medium" | "high"
    reasoning_budget: int | None = None  # Anthropic thinking budget in tokens
    # Whether the model is known to reason (from capabilities). The Responses adapter then
    # asks for encrypted reasoning items even when no effort was chosen.
    reasoning: bool | None = None
    tool_choice: str | None = None  # "auto" | "none" | "required"
    # Ask the provider to cache the request's stable prefix where it must be asked
    # (Anthropic's cache_control breakpoints); OpenAI and compatible servers cache anyway.
    cache: bool = False
    # Extra top-level body fields passed through as-is (e.g. DeepSeek's
    # {"thinking": {"type": "enabled"}}); they win over what the adapter computed.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelInfo:
    """A model as an endpoint lists it; None means the provider did not say."""

    id: str
    display_name: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    supports_vision: bool | None = None
    supports_tools: bool | None = None
    supports_reasoning: bool | None = None


# --- stream events ---------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Reasoning text as it streams (thinking, summaries, reasoning_content). When a signed
    thinking block ends (Anthropic), one more comes with empty `text` and its `signature`,
    so a relay can pass the block on whole and in order (the gateway); the signature is
    also in `Finish.reasoning_details`, which is what a turn stores."""

    text: str
    signature: str | None = None


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of a tool call. `id` and `name` are set on the first delta of an index
    (the moment to show "preparing tool"); later deltas carry argument fragments only."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_fragment: str = ""


@dataclass(frozen=True)
class ToolCallComplete:
    """A whole tool call. `arguments` is the parsed JSON object, or None with
    `arguments_error` saying why (invalid JSON, not an object); the agent turns that into
    a tool result the model can read. `arguments_json` is the raw text as streamed."""

    index: int
    id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_json: str
    arguments_error: str | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None


@dataclass(frozen=True)
class Finish:
    """The model stopped. `reason` is neutral (FINISH_REASONS); `raw_reason` is the
    provider's. `reasoning_details` is the envelope to store on the assistant message:
    {"format": one of REASONING_FORMATS, "model": ..., "items": [...], "field"?: ...},
    or None when the step produced no structured reasoning."""

    reason: str
    raw_reason: str | None = None
    reasoning_details: dict[str, Any] | None = None


@dataclass(frozen=True)
class StreamError:
    """The provider failed. `code` is stable (see numi.providers.errors); `message` is
    safe to show. `after_output` tells whether text, reasoning or a tool call had already
    streamed in this step (then no retry or fallback happened)."""

    code: str
    message: str
    retry_after: float | None = None
    status: int | None = None
    after_output: bool = False
    # context_overflow only: (prompt tokens, context size) as the server stated them.
    overflow: tuple[int | None, int | None] | None = None


StreamEvent = (
    TextDelta | ReasoningDelta | ToolCallDelta | ToolCallComplete | Usage | Finish | StreamError
)

# Events that count as output: once one has been yielded, a failure is not retried.
OUTPUT_EVENTS = (TextDelta, ReasoningDelta, ToolCallDelta, ToolCallComplete)
