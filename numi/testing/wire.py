"""Scenarios as each protocol's SSE (PROTOCOLS §1.3, §2.3, §3.3, §6), real error bodies, model lists.

A rendered stream is a list of pre-encoded SSE frames (bytes) mixed with the control
steps Pause, Drop and Stall that the server acts on while writing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .prompt_cache import message_start_usage
from .scenario import (
    Drop,
    ErrorEvent,
    Pause,
    Reasoning,
    RedactedThinking,
    Scenario,
    Stall,
    Text,
    ToolCall,
    split,
)

PROTOCOLS = ("openai_chat", "openai_responses", "anthropic")
CREATED = 1_700_000_000

_CHAT_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_RESPONSES_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}

# kind -> (openai type, openai code, anthropic type, default message)
_ERRORS = {
    "auth": (
        "invalid_request_error",
        "invalid_api_key",
        "authentication_error",
        "Incorrect API key provided.",
    ),
    "bad_request": (
        "invalid_request_error",
        None,
        "invalid_request_error",
        "Invalid request: messages: unexpected field.",
    ),
    "model_not_found": (
        "invalid_request_error",
        "model_not_found",
        "not_found_error",
        "The model does not exist or you do not have access to it.",
    ),
    "rate_limit": (
        "requests",
        "rate_limit_exceeded",
        "rate_limit_error",
        "Rate limit reached. Please try again in 1s.",
    ),
    "server": (
        "server_error",
        "server_error",
        "api_error",
        "The server had an error while processing your request.",
    ),
    "overloaded": ("server_error", "server_error", "overloaded_error", "Overloaded"),
    "context_length": (
        "invalid_request_error",
        "context_length_exceeded",
        "invalid_request_error",
        None,
    ),
}
_CONTEXT_MESSAGES = {
    "openai_chat": (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130412 tokens. Please reduce the length of the messages."
    ),
    "openai_responses": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "anthropic": "prompt is too long: 208310 tokens > 200000 maximum",
}


def encode(data: Any, event: str | None = None) -> bytes:
    """One SSE frame: optional `event:` line, one-line JSON `data:`, blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def error_body(protocol: str, kind: str, message: str | None = None) -> dict[str, Any]:
    """The provider's real JSON error body for an error kind."""
    openai_type, openai_code, anthropic_type, default = _ERRORS.get(kind, _ERRORS["server"])
    text = message or default or _CONTEXT_MESSAGES[protocol]
    if protocol == "anthropic":
        return {
            "type": "error",
            "error": {"type": anthropic_type, "message": text},
            "request_id": "req_scripted",
        }
    return {"error": {"message": text, "type": openai_type, "param": None, "code": openai_code}}


def model_list(protocol: str, models: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """GET /v1/models in OpenAI shape, or Anthropic's (with has_more: false)."""
    models = list(models)
    if protocol == "anthropic":
        data = [
            {
                "type": "model",
                "id": m["id"],
                "display_name": m.get("display_name", m["id"]),
                "created_at": "2025-01-01T00:00:00Z",
                **{k: v for k, v in m.items() if k not in ("id", "display_name")},
            }
            for m in models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    data = [
        {
            "id": m["id"],
            "object": "model",
            "created": CREATED,
            "owned_by": "numi",
            **{k: v for k, v in m.items() if k != "id"},
        }
        for m in models
    ]
    return {"object": "list", "data": data}


def render(scenario: Scenario, protocol: str, model: str) -> list[Any]:
    """The scenario as frames for `protocol`."""
    if scenario.recorded is not None:
        return list(scenario.recorded)
    model = scenario.response_model or model
    renderer = {
        "openai_chat": _ChatRenderer,
        "openai_responses": _ResponsesRenderer,
        "anthropic": _AnthropicRenderer,
    }[protocol]
    return renderer(scenario, model).render()


class _Renderer:
    protocol = ""

    def __init__(self, scenario: Scenario, model: str) -> None:
        self.scenario = scenario
        self.model = model
        self.frames: list[Any] = []

    def frame(self, data: Any, event: str | None = None) -> None:
        self.frames.append(encode(data, event))

    def delta(self, data: Any, event: str | None = None) -> None:
        """A content frame: paced by the scenario's per-chunk delay."""
        if self.scenario.chunk_delay > 0:
            self.frames.append(Pause(self.scenario.chunk_delay))
        self.frames.append(encode(data, event))

    def render(self) -> list[Any]:
        self.start()
        for step in self.scenario.steps:
            if isinstance(step, (Pause, Stall)):
                self.frames.append(step)
            elif isinstance(step, Drop):
                self.frames.append(step)
                return self.frames
            elif isinstance(step, ErrorEvent):
                self.error_event(step)
                return self.frames  # a real stream ends after its error event
            else:
                getattr(self, "step_" + type(step).__name__)(step)
        self.end()
        return self.frames

    def error_message(self, step: ErrorEvent) -> str:
        default = _ERRORS.get(step.kind, _ERRORS["server"])[3]
        return step.message or default or _CONTEXT_MESSAGES[self.protocol]


class _ChatRenderer(_Renderer):
    protocol = "openai_chat"

    def start(self) -> None:
        self.base = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
        }
        self.tool_index = 0
        self.chunk({"role": "assistant", "content": ""})

    def chunk(self, delta: dict[str, Any], finish: str | None = None, paced: bool = False) -> None:
        data = {
            **self.base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        (self.delta if paced else self.frame)(data)

    def step_Text(self, step: Text) -> None:
        for piece in split(step.text, step.chunks):
            self.chunk({"content": piece}, paced=True)

    def step_Reasoning(self, step: Reasoning) -> None:
        pieces = split(step.text, step.chunks)
        if step.chat_field == "think_tag":
            pieces = ["<think>" + pieces[0], *pieces[1:]]
            pieces[-1] += "</think>\n\n"
            for piece in pieces:
                self.chunk({"content": piece}, paced=True)
        elif step.chat_field == "openrouter":
            self.frames.append(b": OPENROUTER PROCESSING\n\n")
            detail = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
            for piece in pieces:
                self.chunk(
                    {
                        "content": "",
                        "reasoning": piece,
                        "reasoning_details": [{**detail, "text": piece}],
                    },
                    paced=True,
                )
            self.chunk(
                {"content": "", "reasoning_details": [{**detail, "signature": step.signature}]}
            )
        else:  # "reasoning_content" (DeepSeek, llama.cpp) or "reasoning" (Ollama, vLLM)
            for piece in pieces:
                self.chunk({"content": None, step.chat_field: piece}, paced=True)

    def step_RedactedThinking(self, step: RedactedThinking) -> None:
        pass  # no Chat Completions equivalent

    def step_ToolCall(self, step: ToolCall) -> None:
        index = self.tool_index
        self.tool_index += 1
        # id, type and name only once per index (PROTOCOLS §1.4).
        self.chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": step.id,
                        "type": "function",
                        "function": {"name": step.name, "arguments": ""},
                    }
                ]
            },
            paced=True,
        )
        for piece in split(step.arguments, step.fragments):
            self.chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, paced=True
            )

    def error_event(self, step: ErrorEvent) -> None:
        self.frame(error_body(self.protocol, step.kind, self.error_message(step)))

    def end(self) -> None:
        scenario = self.scenario
        finish = scenario.raw_finish_reason or _CHAT_FINISH.get(scenario.neutral_finish(), "stop")
        self.chunk({}, finish=finish)
        if scenario.usage_tokens:
            prompt, completion, reasoning = scenario.usage_tokens
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "completion_tokens_details": {"reasoning_tokens": reasoning},
                "prompt_tokens_details": {"cached_tokens": 0},
            }
            self.frame({**self.base, "choices": [], "usage": usage})
        self.frames.append(b"data: [DONE]\n\n")


class _ResponsesRenderer(_Renderer):
    protocol = "openai_responses"

    def start(self) -> None:
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.message: dict[str, Any] | None = None  # the open message item
        self.event("response.created", response=self.response("in_progress", []))
        self.event("response.in_progress", response=self.response("in_progress", []))

    def response(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": "resp_scripted",
            "object": "response",
            "created_at": CREATED,
            "model": self.model,
            "status": status,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            **extra,
        }

    def event(self, kind: str, paced: bool = False, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        (self.delta if paced else self.frame)(data, kind)

    def close_message(self) -> None:
        if self.message is None:
            return
        item, index = self.message, len(self.output)
        text = item["content"][0]["text"]
        self.event(
            "response.output_text.done",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        self.event(
            "response.content_part.done",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            part=item["content"][0],
        )
        item["status"] = "completed"
        self.event("response.output_item.done", output_index=index, item=item)
        self.output.append(item)
        self.message = None

    def step_Text(self, step: Text) -> None:
        index = len(self.output)
        if self.message is None:
            self.message = {
                "id": f"msg_{index}",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self.event("response.output_item.added", output_index=index, item=self.message)
            part = {"type": "output_text", "text": "", "annotations": []}
            self.event(
                "response.content_part.added",
                item_id=self.message["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            self.message = {**self.message, "content": [dict(part)]}
        for piece in split(step.text, step.chunks):
            self.message["content"][0]["text"] += piece
            self.event(
                "response.output_text.delta",
                paced=True,
                item_id=self.message["id"],
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )

    def step_Reasoning(self, step: Reasoning) -> None:
        self.close_message()
        index = len(self.output)
        item_id = f"rs_{index}"
        self.event(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "reasoning", "summary": []},
        )
        self.event(
            "response.reasoning_summary_part.added",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            part={"type": "summary_text", "text": ""},
        )
        for piece in split(step.text, step.chunks):
            self.event(
                "response.reasoning_summary_text.delta",
                paced=True,
                item_id=item_id,
                output_index=index,
                summary_index=0,
                delta=piece,
            )
        part = {"type": "summary_text", "text": step.text}
        self.event(
            "response.reasoning_summary_text.done",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            text=step.text,
        )
        self.event(
            "response.reasoning_summary_part.done",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            part=part,
        )
        item = {
            "id": item_id,
            "type": "reasoning",
            "summary": [part],
            "encrypted_content": step.encrypted,
        }
        self.event("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def step_RedactedThinking(self, step: RedactedThinking) -> None:
        pass  # Anthropic only

    def step_ToolCall(self, step: ToolCall) -> None:
        self.close_message()
        index = len(self.output)
        item = {
            "id": f"fc_{index}",
            "type": "function_call",
            "call_id": step.id,
            "name": step.name,
            "arguments": "",
            "status": "in_progress",
        }
        self.event("response.output_item.added", output_index=index, item=item)
        for piece in split(step.arguments, step.fragments):
            self.event(
                "response.function_call_arguments.delta",
                paced=True,
                item_id=item["id"],
                output_index=index,
                delta=piece,
            )
        self.event(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            name=step.name,
            arguments=step.arguments,
        )
        done = {**item, "arguments": step.arguments, "status": "completed"}
        self.event("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def error_event(self, step: ErrorEvent) -> None:
        code = _ERRORS.get(step.kind, _ERRORS["server"])[1] or "server_error"
        message = self.error_message(step)
        self.event("error", code=code, message=message, param=None)
        self.event(
            "response.failed",
            response=self.response("failed", self.output, error={"code": code, "message": message}),
        )

    def end(self) -> None:
        self.close_message()
        scenario = self.scenario
        usage = None
        if scenario.usage_tokens:
            prompt, completion, reasoning = scenario.usage_tokens
            usage = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": prompt + completion,
            }
        incomplete = scenario.raw_finish_reason or _RESPONSES_INCOMPLETE.get(
            scenario.neutral_finish()
        )
        if incomplete:
            response = self.response(
                "incomplete", self.output, usage=usage, incomplete_details={"reason": incomplete}
            )
            self.event("response.incomplete", response=response)
        else:
            self.event(
                "response.completed", response=self.response("completed", self.output, usage=usage)
            )


class _AnthropicRenderer(_Renderer):
    protocol = "anthropic"

    def start(self) -> None:
        self.index = 0
        self.text_open = False
        usage = message_start_usage(self.scenario)  # with the prompt cache's counts, if any
        message = {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self.event("message_start", message=message)
        self.event("ping")

    def event(self, kind: str, paced: bool = False, **fields: Any) -> None:
        (self.delta if paced else self.frame)({"type": kind, **fields}, kind)

    def open_block(self, block: dict[str, Any]) -> int:
        self.close_text()
        self.event("content_block_start", index=self.index, content_block=block)
        return self.index

    def close_block(self) -> None:
        self.event("content_block_stop", index=self.index)
        self.index += 1

    def close_text(self) -> None:
        if self.text_open:
            self.text_open = False
            self.close_block()

    def step_Text(self, step: Text) -> None:
        if not self.text_open:
            self.open_block({"type": "text", "text": ""})
            self.text_open = True
        for piece in split(step.text, step.chunks):
            self.event(
                "content_block_delta",
                paced=True,
                index=self.index,
                delta={"type": "text_delta", "text": piece},
            )

    def step_Reasoning(self, step: Reasoning) -> None:
        index = self.open_block({"type": "thinking", "thinking": "", "signature": ""})
        for piece in split(step.text, step.chunks):
            self.event(
                "content_block_delta",
                paced=True,
                index=index,
                delta={"type": "thinking_delta", "thinking": piece},
            )
        self.event(
            "content_block_delta",
            index=index,
            delta={"type": "signature_delta", "signature": step.signature},
        )
        self.close_block()

    def step_RedactedThinking(self, step: RedactedThinking) -> None:
        self.open_block({"type": "redacted_thinking", "data": step.data})
        self.close_block()

    def step_ToolCall(self, step: ToolCall) -> None:
        index = self.open_block({"type": "tool_use", "id": step.id, "name": step.name, "input": {}})
        self.event(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": ""},
        )
        for piece in split(step.arguments, step.fragments):
            self.event(
                "content_block_delta",
                paced=True,
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
        self.close_block()

    def error_event(self, step: ErrorEvent) -> None:
        self.frame(error_body(self.protocol, step.kind, self.error_message(step)), "error")

    def end(self) -> None:
        self.close_text()
        scenario = self.scenario
        stop = scenario.raw_finish_reason or _ANTHROPIC_STOP.get(
            scenario.neutral_finish(), "end_turn"
        )
        output_tokens = scenario.usage_tokens[1] if scenario.usage_tokens else 1
        self.event(
            "message_delta",
            delta={"stop_reason": stop, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        )
        self.event("message_stop")
