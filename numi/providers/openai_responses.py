"""OpenAI Responses API, used statelessly (`store: false`). PROTOCOLS §2.

Each request carries the whole conversation as input items. Reasoning items come back
with `encrypted_content` (we ask for it with `include`) and are returned in the step's
reasoning envelope exactly as received, to be replayed before the function calls they
preceded (§2.4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import from_stream_error, interrupted
from .events import ChatRequest, Finish, ReasoningDelta, StreamEvent, TextDelta, Usage
from .openai_base import OpenAIAdapterBase
from .parts import image_data_url, iter_parts, plain_text, tool_result_text
from .think_tags import ThinkTagSplitter, flush_text, split_text
from .toolcalls import ToolCallAssembler

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class OpenAIResponsesAdapter(OpenAIAdapterBase):
    """POST {base}/responses with stream=true."""

    kind = "openai_responses"

    def _open(self, client: Any, request: ChatRequest) -> Any:
        body = self.build_body(request)
        # The long lists go through extra_body, which the SDK sends as they are: its typed
        # transform of `input` costs about 30 ms for 200 items on every call, and
        # build_body() has already produced the exact wire format. Likewise the answer is
        # read as plain dicts (sse.py), not as the SDK's typed event objects. The SDK
        # builds the first request of a route only (OpenAIAdapterBase._open_stream).
        return self._open_stream(
            client,
            body,
            lambda: client.responses.with_streaming_response.create(
                model=body["model"],
                input=[],
                stream=True,
                extra_body={k: v for k, v in body.items() if k != "model"},
            ),
        )

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for a request (without `stream`)."""
        body: dict[str, Any] = {
            "model": request.model,
            "input": [item for message in request.messages for item in input_items(message)],
            "store": False,
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    # Non-strict: strict mode demands additionalProperties:false and every
                    # property required, which user tool schemas rarely satisfy.
                    "strict": False,
                }
                for tool in request.tools
            ]
            if request.tool_choice:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.reasoning_effort or request.reasoning:
            # Only for reasoning models: others answer 400 to encrypted-content requests.
            body["include"] = ["reasoning.encrypted_content"]
            body["reasoning"] = {"summary": "auto"}
            if request.reasoning_effort:
                body["reasoning"]["effort"] = request.reasoning_effort
        body.update(request.extra)
        return body

    def _events(self, sdk_stream: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        tools = ToolCallAssembler()
        reasoning_items: list[dict[str, Any]] = []
        had_tool_calls = False
        think = ThinkTagSplitter()  # `<think>` in the text: llama.cpp's `--reasoning-format none`

        for _name, event in sdk_stream:
            kind = event.get("type")
            if event.get("error"):
                # An error object at the top level: `{"type": "error", "error": {…}}`.
                raise from_stream_error({"error": event["error"]}, api_key=self.api_key)
            if kind == "response.output_text.delta":
                if event.get("delta"):
                    if think.passed:  # the common case, one per token: no generator
                        yield TextDelta(event["delta"])
                    else:
                        yield from split_text(think, event["delta"])
            elif kind == "response.refusal.delta":
                if event.get("delta"):
                    yield TextDelta(event["delta"])
            elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                if event.get("delta"):
                    yield ReasoningDelta(event["delta"])
            elif kind == "response.reasoning_summary_part.added":
                if (event.get("summary_index") or 0) > 0:
                    yield ReasoningDelta("\n\n")  # keep separate summary parts apart
            elif kind == "response.output_item.added":
                item = event.get("item") or {}
                if item.get("type") == "function_call":
                    had_tool_calls = True
                    yield tools.add(
                        event.get("output_index"), id=item.get("call_id"), name=item.get("name")
                    )
            elif kind == "response.function_call_arguments.delta":
                yield tools.add(event.get("output_index"), fragment=event.get("delta") or "")
            elif kind == "response.output_item.done":
                item = event.get("item") or {}
                if item.get("type") == "function_call":
                    # The item in .done is authoritative (PROTOCOLS §2.3).
                    index = event.get("output_index")
                    tools.add(index, id=item.get("call_id"), name=item.get("name"))
                    tools.set_arguments(index, item.get("arguments") or "")
                    done = tools.complete(index)
                    if done:
                        yield done
                elif item.get("type") == "reasoning":
                    reasoning_items.append(item)  # stored exactly as received
            elif kind == "error":
                # The documented flat shape: `{"type": "error", "code", "message", …}`.
                raise from_stream_error(
                    {"error": {"message": event.get("message"), "code": event.get("code")}},
                    api_key=self.api_key,
                )
            elif kind == "response.failed":
                error = (event.get("response") or {}).get("error")
                raise from_stream_error(
                    {"error": error or {"message": "The response failed"}}, api_key=self.api_key
                )
            elif kind in ("response.completed", "response.incomplete"):
                response = event.get("response") or {}
                yield from flush_text(think)
                yield from tools.complete_all()
                usage = _usage(response["usage"]) if response.get("usage") else None
                if usage:
                    yield usage
                # llama.cpp (and the spec's own example) send a cut-off answer as
                # `response.completed` with status "incomplete", not as response.incomplete.
                if kind == "response.incomplete" or response.get("status") == "incomplete":
                    details = response.get("incomplete_details") or {}
                    raw = details.get("reason") or "incomplete"
                    reason = _INCOMPLETE.get(raw, "other")
                elif had_tool_calls:
                    raw, reason = "completed", "tool_calls"
                elif _used_all(usage, request.max_tokens):
                    # llama-server says "completed" even when max_output_tokens cut the
                    # answer off: the output count reaching the limit says it.
                    raw, reason = "max_output_tokens", "length"
                else:
                    raw, reason = "completed", "stop"
                envelope = (
                    {"format": "openai_responses", "model": request.model, "items": reasoning_items}
                    if reasoning_items
                    else None
                )
                yield Finish(reason, raw, envelope)
                return
        raise interrupted("the stream ended before the response completed")


def input_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One internal message as Responses input items."""
    role = message["role"]
    content = message.get("content")
    if role == "tool":
        output: Any = tool_result_text(content)
        images = [p for p in iter_parts(content) if p.get("type") == "image"]
        if images:  # run_python's plots, for a model that can see: the output is a list
            output = [{"type": "input_text", "text": output or "(no output)"}] + [
                {"type": "input_image", "image_url": image_data_url(p), "detail": "auto"}
                for p in images
            ]
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id"),
                "output": output,
            }
        ]
    if role == "assistant":
        items: list[dict[str, Any]] = list(_replayed_reasoning(message))
        text = plain_text(content)
        if text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }
            )
        for call in message.get("tool_calls") or ():
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"].get("arguments") or "{}",
                }
            )
        return items
    parts = []
    for part in iter_parts(content):
        if part.get("type") == "image":
            parts.append(
                {"type": "input_image", "image_url": image_data_url(part), "detail": "auto"}
            )
        elif part.get("type") == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
    return [{"type": "message", "role": role, "content": parts}]


def _replayed_reasoning(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    envelope = message.get("reasoning_details")
    if not isinstance(envelope, dict) or envelope.get("format") != "openai_responses":
        return
    for item in envelope.get("items") or ():
        # Under store:false a reasoning item without its encrypted content is a 404.
        if item.get("type") == "reasoning" and item.get("encrypted_content"):
            yield item


def _used_all(usage: Usage | None, max_tokens: int | None) -> bool:
    """Whether the answer's output count reached the request's limit."""
    output = usage.output_tokens if usage else None
    return bool(max_tokens) and isinstance(output, int) and output >= (max_tokens or 0)


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=raw.get("input_tokens"),
        output_tokens=raw.get("output_tokens"),
        reasoning_tokens=(raw.get("output_tokens_details") or {}).get("reasoning_tokens"),
        cached_input_tokens=(raw.get("input_tokens_details") or {}).get("cached_tokens"),
    )
