"""OpenAI Chat Completions: OpenAI itself and every OpenAI-compatible server
(Ollama, llama.cpp, vLLM, LM Studio, OpenRouter, DeepSeek). PROTOCOLS §1.

Server quirks handled here:
- reasoning text arrives as `delta.reasoning_content` (DeepSeek, llama.cpp, old vLLM) or
  `delta.reasoning` (Ollama, current vLLM, OpenRouter); which one is remembered in the
  reasoning envelope so it can be sent back in the same field;
- OpenRouter's typed `reasoning_details` fragments are merged by `index` and returned
  unmodified for replay;
- `<think>…</think>` at the start of `content` (llama.cpp `--reasoning-format none`,
  models served without a reasoning parser) is shown as reasoning;
- tool-call `id`/`name` repeated on every delta are taken once; a missing `index` falls
  back to the position in the delta; a missing id is invented;
- `finish_reason: "stop"` on a step that produced tool calls (some Ollama builds) is
  reported as `tool_calls`; unknown reasons (DeepSeek `insufficient_system_resource`)
  become `other`;
- `max_completion_tokens` goes to api.openai.com only; other servers get `max_tokens`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import from_stream_error, interrupted
from .events import (
    ChatRequest,
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from .openai_base import OpenAIAdapterBase
from .parts import image_data_url, iter_parts, plain_text, tool_result_text
from .think_tags import ThinkTagSplitter, flush_text, split_text
from .toolcalls import ToolCallAssembler

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAIChatAdapter(OpenAIAdapterBase):
    """POST {base}/chat/completions with stream=true."""

    kind = "openai_chat"
    needs_key = False  # local servers run without one

    def _open(self, client: Any, request: ChatRequest) -> Any:
        body = self.build_body(request)
        # The long lists go through extra_body, which the SDK sends as they are: its typed
        # transform of `messages` costs about 30 ms for 200 messages on every call, and
        # build_body() has already produced the exact wire format. Likewise the answer is
        # read as plain dicts (sse.py), not as the SDK's typed event objects. The SDK
        # builds the first request of a route only (OpenAIAdapterBase._open_stream).
        return self._open_stream(
            client,
            body,
            lambda: client.chat.completions.with_streaming_response.create(
                model=body["model"],
                messages=[],
                stream=True,
                extra_body={k: v for k, v in body.items() if k != "model"},
            ),
        )

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for a request (without `stream`)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(chat_messages(request.messages))
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            if request.tool_choice:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            # OpenAI's reasoning models reject max_tokens; many compatible servers only
            # know max_tokens.
            key = "max_completion_tokens" if self.is_openai_proper else "max_tokens"
            body[key] = request.max_tokens
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        body.update(request.extra)
        return body

    def _events(self, sdk_stream: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        tools = ToolCallAssembler()
        reasoning = _ReasoningCollector()
        think = ThinkTagSplitter()
        usage: Usage | None = None
        raw_reason: str | None = None

        for _name, chunk in sdk_stream:
            if chunk.get("error"):  # an error inside the 200 stream (vLLM, OpenRouter…)
                raise from_stream_error({"error": chunk["error"]}, api_key=self.api_key)
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            if not chunk.get("choices"):
                continue
            choice = chunk["choices"][0]
            delta = choice.get("delta") or {}
            text = reasoning.add(delta)
            if text:
                yield ReasoningDelta(text)
            content = delta.get("content")
            if content:
                if think.passed:  # the common case, one per token: no splitter generator
                    yield TextDelta(content)
                else:
                    yield from split_text(think, content)
            for position, call in enumerate(delta.get("tool_calls") or ()):
                index = call.get("index")
                function = call.get("function") or {}
                yield tools.add(
                    position if index is None else index,
                    id=call.get("id"),
                    name=function.get("name"),
                    fragment=function.get("arguments") or "",
                )
            if choice.get("finish_reason"):
                raw_reason = choice["finish_reason"]
                if raw_reason == "error":  # OpenRouter marks a failed choice this way
                    raise from_stream_error(
                        delta.get("error") or {"message": "The provider failed"},
                        api_key=self.api_key,
                    )

        if raw_reason is None:
            raise interrupted("the stream ended before the model finished")
        yield from flush_text(think)
        had_tool_calls = tools.count > 0
        yield from tools.complete_all()
        if usage:
            yield usage
        reason = _FINISH.get(raw_reason, "other")
        if had_tool_calls and reason in ("stop", "other"):
            reason = "tool_calls"
        yield Finish(reason, raw_reason, reasoning.envelope(request.model))


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Internal messages in Chat Completions shape. A tool message carries text only, so
    the images of a run of tool results (a plot run_python drew, for a model that can see)
    follow it in one user message: between the results it would break their pairing."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] != "tool" and pending:
            out.append({"role": "user", "content": pending})
            pending = []
        out.append(chat_message(message))
        if message["role"] == "tool":
            images = [p for p in iter_parts(message.get("content")) if p.get("type") == "image"]
            if images:
                pending.append(
                    {
                        "type": "text",
                        "text": f"Images of tool result {message.get('tool_call_id')}:",
                    }
                )
                pending.extend(
                    {"type": "image_url", "image_url": {"url": image_data_url(p)}} for p in images
                )
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """One internal message in Chat Completions shape."""
    role = message["role"]
    content = message.get("content")
    if role == "tool":
        text = tool_result_text(content)
        return {"role": "tool", "tool_call_id": message.get("tool_call_id"), "content": text}
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": plain_text(content) or None}
        if message.get("tool_calls"):
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"].get("arguments") or "{}",
                    },
                }
                for call in message["tool_calls"]
            ]
        elif out["content"] is None:
            out["content"] = ""
        out.update(_replayed_reasoning(message))
        return out
    if role == "system":
        return {"role": "system", "content": plain_text(content)}
    return {"role": role, "content": _user_content(content)}


def _user_content(content: Any) -> Any:
    parts = list(iter_parts(content))
    if not any(part.get("type") == "image" for part in parts):
        # A plain string: servers without vision support often reject part lists.
        return "\n\n".join(part.get("text", "") for part in parts)
    wire = []
    for part in parts:
        if part.get("type") == "image":
            wire.append({"type": "image_url", "image_url": {"url": image_data_url(part)}})
        elif part.get("type") == "text":
            wire.append({"type": "text", "text": part.get("text", "")})
    return wire


def _replayed_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    """The reasoning fields prepare_messages() left on an assistant message, in the
    field this kind of server reads: OpenRouter's details array unmodified, else the text
    in the field the server streamed it in."""
    envelope = message.get("reasoning_details")
    text = message.get("reasoning_content")
    fields: dict[str, Any] = {}
    if (
        isinstance(envelope, dict)
        and envelope.get("format") == "openrouter"
        and envelope.get("items")
    ):
        fields["reasoning_details"] = envelope["items"]
        return fields
    if text:
        field = envelope.get("field") if isinstance(envelope, dict) else None
        fields[field or "reasoning_content"] = text
    return fields


def _usage(raw: dict[str, Any]) -> Usage:
    completion_details = raw.get("completion_tokens_details") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens"),
        output_tokens=raw.get("completion_tokens"),
        reasoning_tokens=completion_details.get("reasoning_tokens"),
        cached_input_tokens=prompt_details.get("cached_tokens"),
    )


class _ReasoningCollector:
    """Reads the reasoning extras of each delta; builds the envelope at the end."""

    def __init__(self) -> None:
        self.field: str | None = None
        self.details: dict[int, dict[str, Any]] = {}

    # The delta keys that carry reasoning: most deltas (one per token) have none of them.
    KEYS = frozenset(("reasoning_content", "reasoning", "reasoning_details"))

    def add(self, delta: dict[str, Any]) -> str:
        """Take one delta's reasoning fields; return reasoning text to show."""
        if self.KEYS.isdisjoint(delta):
            return ""
        text = ""
        for field in ("reasoning_content", "reasoning"):
            value = delta.get(field)
            if isinstance(value, str) and value:
                self.field = self.field or field
                text = value
                break
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            shown = self._merge(details)
            text = text or shown
        return text

    def _merge(self, fragments: list[Any]) -> str:
        """Merge OpenRouter detail fragments by index: text and summary concatenate;
        signature and encrypted data keep the last non-empty value."""
        shown = ""
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index", position)
            item = self.details.setdefault(index, {})
            for key, value in fragment.items():
                if key in ("text", "summary") and isinstance(value, str):
                    item[key] = item.get(key, "") + value
                    shown += value
                elif value not in (None, ""):
                    item[key] = value
        return shown

    def envelope(self, model: str) -> dict[str, Any] | None:
        if self.details:
            return {
                "format": "openrouter",
                "model": model,
                "field": self.field or "reasoning",
                "items": [self.details[index] for index in sorted(self.details)],
            }
        if self.field:
            return {"format": "openai_chat", "model": model, "field": self.field, "items": []}
        return None
