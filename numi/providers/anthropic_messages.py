"""Anthropic Messages API. PROTOCOLS §3.

The system prompt is top level; tool results travel as `tool_result` blocks at the start
of the next user message; images are base64 source blocks. Thinking and
redacted_thinking blocks are collected complete and unmodified (text and signature) into
the step's reasoning envelope, and replayed first in their assistant message (§3.4).

Requests are sent by Numi's own wire code (anthropic_wire.py), not the anthropic SDK,
whose import alone costs a server ~42 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .anthropic_wire import MessagesClient
from .base import ProviderAdapter
from .errors import from_stream_error, interrupted
from .events import (
    ChatRequest,
    Finish,
    ModelInfo,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from .model_lists import is_llama_server, openai_model_info, with_llama_server_props
from .parts import image_base64, iter_parts, plain_text, tool_result_text
from .sse import SSEStream
from .think_tags import ThinkTagSplitter, flush_text, split_text
from .toolcalls import ToolCallAssembler, parse_arguments

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# Thinking budgets for a reasoning effort when no explicit budget was set.
EFFORT_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicAdapter(ProviderAdapter):
    """POST {base}/v1/messages with stream=true."""

    kind = "anthropic"

    def _make_client(self) -> MessagesClient:
        return MessagesClient(
            self.base_url,
            self.default_query,
            api_key=self.api_key or "no-key",
            timeout=self.sdk_timeout(),
            transport=self.transport,
            headers_timeout=self.headers_timeout,
        )

    def _list_models(self, client: MessagesClient) -> list[ModelInfo]:
        # llama-server serves /v1/messages too, and answers GET /v1/models with its own
        # list (and /props) whatever the wire kind: read them as the other kinds do.
        listed = client.models()
        return with_llama_server_props(client, self.base_url, listed, _model_info)

    def _open(self, client: MessagesClient, request: ChatRequest) -> Any:
        # build_body() produces the exact wire format; the answer is read as plain dicts
        # (sse.py), not as typed event objects.
        return SSEStream(client.stream(self.build_body(request)))

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for a request (without `stream`)."""
        system_parts = [request.system] if request.system else []
        system_parts += [
            plain_text(m.get("content")) for m in request.messages if m["role"] == "system"
        ]
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or default_max_tokens(request.model),
            "messages": anthropic_messages(request.messages),
        }
        if system_parts:
            body["system"] = "\n\n".join(part for part in system_parts if part)
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                }
                for tool in request.tools
            ]
            if request.tool_choice in _TOOL_CHOICE:
                body["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
        budget = request.reasoning_budget or EFFORT_BUDGETS.get(request.reasoning_effort or "")
        if budget:
            budget = max(1024, budget)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            # The budget must be below max_tokens; room is left for the answer itself.
            if body["max_tokens"] <= budget:
                body["max_tokens"] = budget + 4096
            # With thinking on, the API refuses temperature changes.
        elif request.temperature is not None:
            body["temperature"] = request.temperature
        if request.cache:
            place_cache_breakpoints(body)
        body.update(request.extra)
        return body

    def _events(self, sdk_stream: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        tools = ToolCallAssembler()
        thinking: dict[int, dict[str, Any]] = {}
        # The last event that carries a count wins: llama.cpp puts the prompt counts in
        # message_start, LiteLLM sends zeros there and the real counts in message_delta.
        counts: dict[str, int] = {}
        raw_reason: str | None = None
        think = ThinkTagSplitter()  # `<think>` in the text: llama.cpp's `--reasoning-format none`

        for name, event in sdk_stream:
            kind = event.get("type")
            if name == "error" or kind == "error":
                # An error inside the 200 stream, e.g. overloaded_error (PROTOCOLS §4.3).
                raise from_stream_error(event, api_key=self.api_key)
            if kind == "content_block_delta":
                delta, index = event["delta"], event.get("index")
                delta_type = delta.get("type")
                if delta_type == "text_delta":
                    if think.passed:  # the common case, one per token: no generator
                        yield TextDelta(delta["text"])
                    else:
                        yield from split_text(think, delta["text"])
                elif delta_type == "thinking_delta":
                    thinking[index]["thinking"] += delta["thinking"]
                    yield ReasoningDelta(delta["thinking"])
                elif delta_type == "signature_delta":
                    thinking[index]["signature"] = delta["signature"]
                    yield ReasoningDelta("", signature=delta["signature"])
                elif delta_type == "input_json_delta" and delta.get("partial_json"):
                    yield tools.add(index, fragment=delta["partial_json"])
            elif kind == "content_block_start":
                block, index = event["content_block"], event.get("index")
                if block.get("type") == "thinking":
                    thinking[index] = {
                        "type": "thinking",
                        "thinking": block.get("thinking") or "",
                        "signature": block.get("signature") or "",
                    }
                elif block.get("type") == "redacted_thinking":
                    thinking[index] = {"type": "redacted_thinking", "data": block.get("data")}
                elif block.get("type") == "tool_use":
                    yield tools.add(index, id=block.get("id"), name=block.get("name"))
            elif kind == "content_block_stop":
                done = tools.complete(event.get("index"))
                if done:
                    yield done
            elif kind == "message_start":
                _merge_usage(counts, event["message"].get("usage"))
            elif kind == "message_delta":
                raw_reason = (event.get("delta") or {}).get("stop_reason") or raw_reason
                _merge_usage(counts, event.get("usage"))
            elif kind == "message_stop":
                yield from flush_text(think)
                yield from tools.complete_all()
                yield _usage(counts)
                items = [thinking[index] for index in sorted(thinking)]
                envelope = (
                    {"format": "anthropic", "model": request.model, "items": items}
                    if items
                    else None
                )
                yield Finish(_STOP.get(raw_reason or "", "other"), raw_reason, envelope)
                return
        raise interrupted("the stream ended before the message stopped")


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _merge_usage(counts: dict[str, int], usage: Any) -> None:
    """Take an event's `usage` counts into `counts`. A later count replaces an earlier
    one, except that a zero never replaces a non-zero count (LiteLLM's zeros in
    message_start come first; a message_delta may repeat a field as 0)."""
    if not isinstance(usage, dict):
        return
    for name in _USAGE_FIELDS:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            if value or not counts.get(name):
                counts[name] = value


def _usage(counts: dict[str, int]) -> Usage:
    """Usage with the whole prompt as input: Anthropic's `input_tokens` is only the part
    after the last cache breakpoint; cache reads and writes are prompt tokens too."""
    cached = counts.get("cache_read_input_tokens")
    parts = [counts.get(name) for name in _USAGE_FIELDS if name != "output_tokens"]
    known = [part for part in parts if part is not None]
    return Usage(
        input_tokens=sum(known) if known else None,
        output_tokens=counts.get("output_tokens"),
        cached_input_tokens=cached,
    )


# Anthropic takes at most four cache_control breakpoints per request.
MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def place_cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark the stable prefix of a request body for Anthropic's prompt cache (PROTOCOLS:
    tools, then system, then messages are one prefix). Three breakpoints: after the tools
    and the system prompt (the same on every request of a chat), at the end of the history
    before the newest question (what the previous turn wrote: read back now), and at the
    end of the request (written now, read by the next step or turn). Thinking blocks are
    never marked (the API refuses it); a prefix under the model's minimum is simply not
    cached."""
    marks = 0
    if body.get("system"):
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": _EPHEMERAL}]
        marks += 1
    elif body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": _EPHEMERAL}
        marks += 1
    messages = body.get("messages") or []
    last_question = max(
        (
            i
            for i, m in enumerate(messages)
            if m["role"] == "user" and any(b.get("type") != "tool_result" for b in m["content"])
        ),
        default=None,
    )
    positions = [len(messages) - 1]
    if last_question:
        positions.insert(0, last_question - 1)
    for position in positions:
        if marks >= MAX_BREAKPOINTS or position < 0:
            continue
        content = messages[position]["content"]
        for index in range(len(content) - 1, -1, -1):
            if content[index].get("type") not in ("thinking", "redacted_thinking"):
                content[index] = {**content[index], "cache_control": _EPHEMERAL}
                marks += 1
                break


def default_max_tokens(model: str) -> int:
    """Anthropic requires max_tokens. Claude 3 (not 3.5/3.7) models cap output at 4096."""
    legacy = model.startswith("claude-3-") and not model.startswith(("claude-3-5", "claude-3-7"))
    return 4096 if legacy else 8192


def anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Internal messages as alternating user/assistant messages of blocks. Tool results
    open the next user message (the API demands them first); same-role neighbours merge."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            continue  # moved to the top-level system prompt
        if role == "tool":
            blocks = [_tool_result(message)]
            role = "user"
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            blocks = _user_blocks(message.get("content"))
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous = out[-1]["content"]
            if role == "user" and blocks[0]["type"] == "tool_result":
                # Keep every tool_result ahead of text that arrived before it.
                results = [b for b in previous if b["type"] == "tool_result"]
                others = [b for b in previous if b["type"] != "tool_result"]
                out[-1]["content"] = results + blocks + others
            else:
                previous.extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    blocks = []
    for part in iter_parts(content):
        if part.get("type") == "image":
            blocks.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": part.get("mime") or "image/png",
                        "data": image_base64(part),
                    },
                }
            )
        elif part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})  # empty text blocks are a 400
    return blocks


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    envelope = message.get("reasoning_details")
    if isinstance(envelope, dict) and envelope.get("format") == "anthropic":
        # Replayed first, byte for byte; unsigned thinking would be rejected.
        for item in envelope.get("items") or ():
            if (item.get("type") == "thinking" and item.get("signature")) or (
                item.get("type") == "redacted_thinking" and item.get("data")
            ):
                blocks.append(dict(item))
    text = plain_text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        arguments, _error = parse_arguments(call["function"].get("arguments") or "")
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": arguments or {},
            }
        )
    return blocks


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    text = tool_result_text(content)
    # A tool result may carry images (run_python's plots, for a model that can see): the
    # block then holds its text and image blocks.
    images = [b for b in _user_blocks(content) if b["type"] == "image"]
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": [{"type": "text", "text": text or "(no output)"}, *images] if images else text,
    }
    if message.get("is_error"):
        block["is_error"] = True
    return block


def _model_info(model: Any) -> ModelInfo:
    if is_llama_server(model):
        # Not an Anthropic model: its list says the allocated context (`meta.n_ctx`), its
        # /props whether the loaded template takes tools; nothing is assumed.
        return openai_model_info(model)
    capabilities = getattr(model, "capabilities", None)

    def supported(name: str) -> bool | None:
        value = getattr(capabilities, name, None) if capabilities is not None else None
        return getattr(value, "supported", None) if value is not None else None

    return ModelInfo(
        id=model.id,
        display_name=getattr(model, "display_name", None),
        context_window=getattr(model, "max_input_tokens", None),
        max_output_tokens=getattr(model, "max_tokens", None),
        supports_vision=supported("image_input"),
        supports_tools=True,
        supports_reasoning=supported("thinking"),
    )
