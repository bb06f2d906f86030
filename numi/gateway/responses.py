"""The OpenAI Responses API (PROTOCOLS §2) at /v1/responses: its body read into a
`GatewayCall`, and neutral events written back as its typed events or one response.

Numi stores no responses: a client sends the whole input each time (`store: false`, as
stateless clients do); `previous_response_id` is refused with `invalid_body`. Reasoning
comes back as a reasoning item with a summary (no encrypted content: it is not the
model's own reasoning item unless the endpoint is a Responses one, and even then Numi
keeps none).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
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
from .errors import bad_body, provider_status
from .inbound import (
    GatewayCall,
    _Calls,
    _common,
    _image,
    _text_of,
    _tool_spec,
    openai_call,
    openai_effort,
)
from .relay import Answer


def read(body: Any, *, max_messages: int) -> GatewayCall:
    """A Responses body as a GatewayCall."""
    if not isinstance(body, dict):
        raise bad_body("The body must be a JSON object.")
    if body.get("previous_response_id") is not None:
        raise bad_body(
            "Numi keeps no responses: send the whole conversation in input (store: false).",
            "previous_response_id",
        )
    raw = body.get("input")
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    model, items, stream = _common({**body, "messages": items}, max_messages)
    messages: list[dict[str, Any]] = []
    calls = _Calls()
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    for i, item in enumerate(items):
        param = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                system.append(_text_of(item.get("content"), f"{param}.content"))
            elif role in ("user", "assistant"):
                content = _parts(item.get("content"), f"{param}.content")
                messages.append({"role": role, "content": content})
            else:
                raise bad_body(
                    "role must be user, assistant, system or developer.", f"{param}.role"
                )
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise bad_body("A function_call needs a call_id and a name.", param)
            calls.called(call_id)
            arguments = item.get("arguments") or ""
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = calls.answered(item.get("call_id"), f"{param}.call_id")
            output = item.get("output")
            text = output if isinstance(output, str) else _text_of(output, f"{param}.output")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "reasoning":
            continue  # another model's opaque item: never forwarded
        else:
            raise bad_body(
                "input items may be message, function_call, function_call_output or reasoning.",
                f"{param}.type",
            )
    if not any(m["role"] in ("user", "tool") for m in messages):
        raise bad_body("input needs at least one user message.", "input")
    reasoning = body.get("reasoning")
    effort = openai_effort(
        reasoning.get("effort") if isinstance(reasoning, dict) else None, "reasoning.effort"
    )
    return openai_call(
        "openai_responses",
        body,
        model=model,
        messages=messages,
        system=system,
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        max_tokens_params=("max_output_tokens",),
        effort=effort,
        stream=stream,
    )


def _parts(content: Any, param: str) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_body("content must be a string or a list of parts.", param)
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            parts.append(_image(part.get("image_url"), f"{param}[{i}].image_url"))
        else:
            raise bad_body("Parts may be input_text, output_text or input_image.", f"{param}[{i}]")
    return parts


def _tools(value: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_body("tools must be a list.", "tools")
    tools = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise bad_body(
                'Numi passes on function tools only ({"type": "function", ...}).', f"tools[{i}]"
            )
        tools.append(
            _tool_spec(
                tool.get("name"), tool.get("description"), tool.get("parameters"), f"tools[{i}]"
            )
        )
    return tools


def _tool_choice(value: Any) -> str | None:
    if value is None or value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        return "required"
    raise bad_body('tool_choice must be "none", "auto", "required" or a function.', "tool_choice")


# --- writing -----------------------------------------------------------------------------------


class ResponsesWriter:
    """Responses events (`event:` + `data:` with `type` and `sequence_number`), or one
    response object."""

    def __init__(self, model: str):
        self.model = model
        self.id = "resp_" + secrets.token_hex(12)
        self.created = int(time.time())
        self.sequence = 0

    def response(self, status: str, output: list, usage: Usage | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": status,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
        }
        if usage is not None or status == "completed":
            body["usage"] = responses_usage(usage)
        return body

    def _event(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {kind}\ndata: {text}\n\n".encode()

    def frames(self, events: Iterator[StreamEvent]) -> Iterator[bytes]:
        """The SSE events of a streamed response."""
        yield self._event("response.created", response=self.response("in_progress", []))
        yield self._event("response.in_progress", response=self.response("in_progress", []))
        output: list[dict[str, Any]] = []
        item: dict[str, Any] | None = None
        text: list[str] = []
        usage: Usage | None = None
        by_index: dict[int, dict[str, Any]] = {}

        def close() -> Iterator[bytes]:
            nonlocal item
            if item is None:
                return
            index, joined = len(output), "".join(text)
            if item["type"] == "reasoning":
                part = {"type": "summary_text", "text": joined}
                ids = {"item_id": item["id"], "output_index": index, "summary_index": 0}
                yield self._event("response.reasoning_summary_text.done", **ids, text=joined)
                yield self._event("response.reasoning_summary_part.done", **ids, part=part)
                item["summary"] = [part]
            elif item["type"] == "message":
                part = {"type": "output_text", "text": joined, "annotations": []}
                ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield self._event("response.output_text.done", **ids, text=joined, logprobs=[])
                yield self._event("response.content_part.done", **ids, part=part)
                item.update(status="completed", content=[part])
            else:
                item.update(status="completed", arguments=joined)
                yield self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=joined,
                )
            yield self._event("response.output_item.done", output_index=index, item=item)
            output.append(item)
            item = None
            text.clear()

        def open_item(new: dict[str, Any]) -> Iterator[bytes]:
            nonlocal item
            yield from close()
            item = new
            index = len(output)
            yield self._event("response.output_item.added", output_index=index, item=dict(new))
            if new["type"] == "reasoning":
                yield self._event(
                    "response.reasoning_summary_part.added",
                    item_id=new["id"],
                    output_index=index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
            elif new["type"] == "message":
                yield self._event(
                    "response.content_part.added",
                    item_id=new["id"],
                    output_index=index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )

        def add_text(
            item_type: str, new: Callable[[], dict[str, Any]], name: str, chunk: str, **fields: Any
        ) -> Iterator[bytes]:
            """`chunk` into the open item, opening `new()` first unless an item of
            `item_type` is open; `fields` are the delta event's own, in their order."""
            if item is None or item["type"] != item_type:
                yield from open_item(new())
            text.append(chunk)
            yield self._event(
                name,
                item_id=item["id"],  # type: ignore[index]
                output_index=len(output),
                **fields,
            )

        for event in events:
            if isinstance(event, ReasoningDelta) and event.text:
                yield from add_text(
                    "reasoning",
                    lambda: {
                        "id": "rs_" + secrets.token_hex(8),
                        "type": "reasoning",
                        "summary": [],
                    },
                    "response.reasoning_summary_text.delta",
                    event.text,
                    summary_index=0,
                    delta=event.text,
                )
            elif isinstance(event, TextDelta):
                yield from add_text(
                    "message",
                    lambda: {
                        "id": "msg_" + secrets.token_hex(8),
                        "type": "message",
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    },
                    "response.output_text.delta",
                    event.text,
                    content_index=0,
                    delta=event.text,
                    logprobs=[],
                )
            elif isinstance(event, (ToolCallDelta, ToolCallComplete)):
                if event.index not in by_index:
                    call_id = event.id or "call_" + secrets.token_hex(8)
                    by_index[event.index] = {
                        "id": "fc_" + secrets.token_hex(8),
                        "type": "function_call",
                        "call_id": call_id,
                        "name": event.name or "",
                        "arguments": "",
                        "status": "in_progress",
                    }
                    yield from open_item(by_index[event.index])
                    if isinstance(event, ToolCallComplete):
                        fragment = event.arguments_json or "{}"
                    else:
                        fragment = event.arguments_fragment
                elif isinstance(event, ToolCallDelta):
                    fragment = event.arguments_fragment
                else:
                    fragment = ""
                if fragment:
                    text.append(fragment)
                    yield self._event(
                        "response.function_call_arguments.delta",
                        item_id=by_index[event.index]["id"],
                        output_index=len(output),
                        delta=fragment,
                    )
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                yield from close()
                status = "incomplete" if event.reason == "length" else "completed"
                body = self.response(status, output, usage)
                if status == "incomplete":
                    body["incomplete_details"] = {"reason": "max_output_tokens"}
                yield self._event(f"response.{status}", response=body)
                return
            elif isinstance(event, StreamError):
                yield self._event("error", code=event.code, message=event.message, param=None)
                failed = self.response("failed", output, usage)
                failed["error"] = {"code": event.code, "message": event.message}
                yield self._event("response.failed", response=failed)
                return

    def body(self, answer: Answer) -> dict[str, Any]:
        """The whole response of a non-streaming request."""
        output: list[dict[str, Any]] = []
        if answer.reasoning:
            output.append(
                {
                    "id": "rs_" + secrets.token_hex(8),
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "".join(answer.reasoning)}],
                }
            )
        if answer.content:
            output.append(
                {
                    "id": "msg_" + secrets.token_hex(8),
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": answer.content, "annotations": []}],
                }
            )
        output.extend(
            {
                "id": "fc_" + secrets.token_hex(8),
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments_json or "{}",
                "status": "completed",
            }
            for call in answer.tool_calls
        )
        status = "incomplete" if answer.finish_reason == "length" else "completed"
        return self.response(status, output, answer.usage)


def responses_usage(usage: Usage | None) -> dict[str, Any]:
    prompt = (usage.input_tokens if usage else None) or 0
    completion = (usage.output_tokens if usage else None) or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": (usage.cached_input_tokens if usage else None) or 0
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": (usage.reasoning_tokens if usage else None) or 0
        },
        "total_tokens": prompt + completion,
    }


def failure_status(error: StreamError) -> int:
    return provider_status(error.code)
