"""A client's request body, read into one neutral `GatewayCall`.

Chat Completions and Anthropic Messages bodies become the internal OpenAI-like messages
that every provider adapter takes (numi.agent.prepare), so a client of either protocol
reaches an endpoint of any kind. Everything is checked here, before anything is called
or saved: a wrong type, an unknown role or part, a tool result without its call, too
many messages, `stream_options` without `stream` each refuse the request with a stable
code and the field it is about (`param`), in the protocol's own error shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..providers.events import ToolSpec
from .errors import GatewayError, bad_body

EFFORTS = ("minimal", "low", "medium", "high")
_DATA_URL = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.*)$", re.S | re.I)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@dataclass
class GatewayCall:
    """One client request, protocol-neutral. `messages` are internal messages without
    system ones; `system` is the client's system prompt."""

    protocol: str  # "openai_chat" | "openai_responses" | "anthropic"
    model: str
    messages: list[dict[str, Any]]
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    stream: bool = False
    include_usage: bool = False

    @property
    def question(self) -> str:
        """The text of the newest user message: what a project's documents are searched
        for, as the page searches them for a chat's newest question."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                content = message["content"]
                if isinstance(content, str):
                    return content
                return "\n\n".join(p["text"] for p in content if p.get("type") == "text")
        return ""


def _number(body: dict, name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_body(f"{name} must be a number from {low:g} to {high:g}.", name)
    return float(value)


def _whole(body: dict, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_body(f"{name} must be a whole number of at least 1.", name)
    return value


def _common(body: Any, max_messages: int) -> tuple[str, list, bool]:
    if not isinstance(body, dict):
        raise bad_body("The body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_body("model must be a model name (GET /v1/models lists them).", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_body("messages must be a non-empty list.", "messages")
    if len(messages) > max_messages:
        raise GatewayError(
            "too_many_messages",
            f"A request may carry at most {max_messages} messages; this one has {len(messages)}.",
            400,
            param="messages",
        )
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_body("stream must be true or false.", "stream")
    return model.strip(), messages, stream


def _text_of(content: Any, param: str) -> str:
    """Text-only content (system, developer, tool results): a string or text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                raise bad_body("Only text parts are accepted here.", f"{param}[{i}]")
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_body("A text part needs a text string.", f"{param}[{i}].text")
            texts.append(text)
        return "\n\n".join(texts)
    raise bad_body("content must be a string or a list of parts.", param)


def _text_part(part: dict[str, Any], where: str, noun: str) -> dict[str, Any]:
    """A text part (Chat Completions) or block (Anthropic), which must carry a string."""
    if not isinstance(part.get("text"), str):
        raise bad_body(f"A text {noun} needs a text string.", f"{where}.text")
    return {"type": "text", "text": part["text"]}


def _image(url: Any, param: str) -> dict[str, Any]:
    if not isinstance(url, str):
        raise bad_body("An image needs a URL (https or data:).", param)
    found = _DATA_URL.match(url)
    if found:
        return {"type": "image", "mime": found.group(1).lower(), "data": found.group(2)}
    if url.startswith("https://"):
        return {"type": "image", "url": url}
    raise bad_body("An image URL must be https:// or a base64 data: URL.", param)


class _Calls:
    """Tool calls seen so far and which have their result: a result needs its call."""

    def __init__(self) -> None:
        self.open: set[str] = set()

    def called(self, call_id: str) -> None:
        self.open.add(call_id)

    def answered(self, call_id: Any, param: str) -> str:
        if not isinstance(call_id, str) or call_id not in self.open:
            raise GatewayError(
                "tool_result_without_call",
                f"The tool result for {call_id!r} follows no tool call with that id.",
                400,
                param=param,
            )
        self.open.discard(call_id)
        return call_id


# --- OpenAI Chat Completions ---------------------------------------------------------------


def chat_completions(body: Any, *, max_messages: int) -> GatewayCall:
    """A Chat Completions body (PROTOCOLS §1.1) as a GatewayCall."""
    model, raw, stream = _common(body, max_messages)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise GatewayError(
                "stream_mixup",
                "stream_options is only allowed when stream is true.",
                400,
                param="stream_options",
            )
        if not isinstance(options, dict):
            raise bad_body("stream_options must be an object.", "stream_options")
        include_usage = options.get("include_usage") is True
    if body.get("n") not in (None, 1):
        raise bad_body("Only n=1 is supported.", "n")
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    calls = _Calls()
    for i, message in enumerate(raw):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_body("Each message must be an object.", param)
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(_text_of(content, f"{param}.content"))
        elif role == "user":
            messages.append({"role": "user", "content": _user_parts(content, f"{param}.content")})
        elif role == "assistant":
            messages.append(_assistant(message, param, calls))
        elif role == "tool":
            call_id = calls.answered(message.get("tool_call_id"), f"{param}.tool_call_id")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": _text_of(content, f"{param}.content"),
                }
            )
        else:
            raise bad_body(
                "role must be system, developer, user, assistant or tool.", f"{param}.role"
            )
    if not messages:
        raise bad_body("messages needs at least one user message.", "messages")
    effort = openai_effort(body.get("reasoning_effort"), "reasoning_effort")
    return openai_call(
        "openai_chat",
        body,
        model=model,
        messages=messages,
        system=system,
        tools=_openai_tools(body.get("tools")),
        tool_choice=_openai_tool_choice(body.get("tool_choice")),
        max_tokens_params=("max_completion_tokens", "max_tokens"),
        effort=effort,
        stream=stream,
        include_usage=include_usage,
    )


def openai_effort(value: Any, param: str) -> str | None:
    """An OpenAI reasoning effort (either protocol), checked; "minimal" means no
    reasoning for the other endpoints."""
    if value is not None and value not in EFFORTS:
        raise bad_body(f"{param} must be one of {', '.join(EFFORTS)}.", param)
    return None if value in (None, "minimal") else value


def openai_call(
    protocol: str,
    body: dict[str, Any],
    *,
    model: str,
    messages: list[dict[str, Any]],
    system: list[str],
    tools: list,
    tool_choice: Any,
    max_tokens_params: tuple[str, ...],
    effort: str | None,
    stream: bool,
    include_usage: bool = False,
) -> GatewayCall:
    """The GatewayCall of either OpenAI protocol (Chat Completions or Responses), which
    share the temperature range; the first of `max_tokens_params` given wins."""
    temperature = _number(body, "temperature", 0, 2)
    max_tokens = None
    for name in max_tokens_params:
        max_tokens = _whole(body, name)
        if max_tokens:
            break
    return GatewayCall(
        protocol=protocol,
        model=model,
        messages=messages,
        system="\n\n".join(s for s in system if s) or None,
        tools=tools,
        tool_choice=tool_choice,
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning_effort=effort,
        stream=stream,
        include_usage=include_usage,
    )


def _user_parts(content: Any, param: str) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise bad_body("content must be a string or a non-empty list of parts.", param)
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(_text_part(part, where, "part"))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            parts.append(_image(url, f"{where}.image_url"))
        else:
            raise bad_body("Parts of a user message may be text or image_url.", f"{where}.type")
    return parts


def _assistant(message: dict, param: str, calls: _Calls) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": "assistant",
        "content": _text_of(message.get("content"), f"{param}.content"),
    }
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise bad_body("tool_calls must be a list.", f"{param}.tool_calls")
        tool_calls = []
        for j, call in enumerate(raw_calls):
            where = f"{param}.tool_calls[{j}]"
            function = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(function, dict)
                or not isinstance(call.get("id"), str)
                or not isinstance(function.get("name"), str)
            ):
                raise bad_body("A tool call needs an id and a function with a name.", where)
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):
                raise bad_body("function.arguments must be a JSON string.", f"{where}.function")
            calls.called(call["id"])
            tool_calls.append(
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": function["name"], "arguments": arguments},
                }
            )
        if tool_calls:
            out["tool_calls"] = tool_calls
    return out


def _schema(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {"type": "object", "properties": {}}
    if not isinstance(value, dict):
        raise bad_body("A tool's parameters must be a JSON Schema object.", param)
    return value


def _tool_spec(name: Any, description: Any, schema: Any, param: str) -> ToolSpec:
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise bad_body("A tool needs a name of letters, digits, _ . : or -.", f"{param}.name")
    if description is not None and not isinstance(description, str):
        raise bad_body("A tool's description must be a string.", f"{param}.description")
    return ToolSpec(name, description or "", _schema(schema, f"{param}.parameters"))


def _openai_tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_body("tools must be a list.", "tools")
    tools = []
    for i, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type", "function") != "function":
            raise bad_body(
                'Each tool must be {"type": "function", "function": {...}}.', f"tools[{i}]"
            )
        tools.append(
            _tool_spec(
                function.get("name"),
                function.get("description"),
                function.get("parameters"),
                f"tools[{i}].function",
            )
        )
    return tools


def _openai_tool_choice(value: Any) -> str | None:
    if value is None:
        return None
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        return "required"  # the neutral request names no single tool: the closest choice
    raise bad_body('tool_choice must be "none", "auto", "required" or a function.', "tool_choice")


# --- Anthropic Messages -----------------------------------------------------------------------


def anthropic_messages(body: Any, *, max_messages: int) -> GatewayCall:
    """An Anthropic Messages body (PROTOCOLS §3.1) as a GatewayCall."""
    model, raw, stream = _common(body, max_messages)
    max_tokens = _whole(body, "max_tokens")
    if max_tokens is None:
        raise bad_body("max_tokens is required.", "max_tokens")
    system = body.get("system")
    system_text = _text_of(system, "system") if system is not None else None
    messages: list[dict[str, Any]] = []
    calls = _Calls()
    for i, message in enumerate(raw):
        param = f"messages.{i}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise bad_body("Each message needs the role user or assistant.", f"{param}.role")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise bad_body("content must be a string or a list of blocks.", f"{param}.content")
        if message["role"] == "user":
            messages.extend(_anthropic_user(blocks, f"{param}.content", calls))
        else:
            messages.append(_anthropic_assistant(blocks, f"{param}.content", calls))
    if not any(m["role"] in ("user", "tool") for m in messages):
        raise bad_body("messages needs at least one user message.", "messages")
    budget, effort = _thinking(body.get("thinking"))
    return GatewayCall(
        protocol="anthropic",
        model=model,
        messages=messages,
        system=system_text or None,
        tools=_anthropic_tools(body.get("tools")),
        tool_choice=_anthropic_tool_choice(body.get("tool_choice")),
        temperature=_number(body, "temperature", 0, 1),
        max_tokens=max_tokens,
        reasoning_budget=budget,
        reasoning_effort=effort,
        stream=stream,
    )


def _anthropic_user(blocks: list, param: str, calls: _Calls) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        where = f"{param}.{i}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(_text_part(block, where, "block"))
        elif kind == "image":
            parts.append(_anthropic_image(block.get("source"), f"{where}.source"))
        elif kind == "tool_result":
            call_id = calls.answered(block.get("tool_use_id"), f"{where}.tool_use_id")
            result: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": call_id,
                "content": _text_of(block.get("content"), f"{where}.content"),
            }
            if block.get("is_error") is True:
                result["is_error"] = True
            results.append(result)
        else:
            raise bad_body("A user block may be text, image or tool_result.", f"{where}.type")
    # Tool results answer the previous message's calls; the user's own words follow them.
    return results + ([{"role": "user", "content": parts}] if parts else [])


def _anthropic_image(source: Any, param: str) -> dict[str, Any]:
    if isinstance(source, dict) and source.get("type") == "base64":
        mime, data = source.get("media_type"), source.get("data")
        if isinstance(mime, str) and mime.startswith("image/") and isinstance(data, str):
            return {"type": "image", "mime": mime, "data": data}
    if isinstance(source, dict) and source.get("type") == "url":
        return _image(source.get("url"), param)
    raise bad_body("An image source must be base64 (media_type, data) or a url.", param)


def _anthropic_assistant(blocks: list, param: str, calls: _Calls) -> dict[str, Any]:
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        where = f"{param}.{i}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise bad_body("A tool_use block needs an id and a name.", where)
            calls.called(block["id"])
            tool_calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block["name"],
                        "arguments": json.dumps(block.get("input") or {}),
                    },
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(dict(block))
        else:
            raise bad_body(
                "An assistant block may be text, thinking, redacted_thinking or tool_use.",
                f"{where}.type",
            )
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if tool_calls:
        out["tool_calls"] = tool_calls
    if thinking:
        # Signed thinking goes back to an Anthropic endpoint unmodified (PROTOCOLS §3.4);
        # the relay names the model it is valid for, or drops it for any other endpoint.
        out["reasoning_details"] = {"format": "anthropic", "model": None, "items": thinking}
    return out


def _anthropic_tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_body("tools must be a list.", "tools")
    tools = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise bad_body("Each tool must be an object.", f"tools.{i}")
        tools.append(
            _tool_spec(
                tool.get("name"), tool.get("description"), tool.get("input_schema"), f"tools.{i}"
            )
        )
    return tools


_ANTHROPIC_CHOICE = {"auto": "auto", "any": "required", "tool": "required", "none": "none"}


def _anthropic_tool_choice(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict) and value.get("type") in _ANTHROPIC_CHOICE:
        return _ANTHROPIC_CHOICE[value["type"]]
    raise bad_body(
        "tool_choice must be an object with type auto, any, tool or none.", "tool_choice"
    )


def _thinking(value: Any) -> tuple[int | None, str | None]:
    """(budget, effort) of Anthropic's `thinking`: enabled with a budget, adaptive (a
    medium effort for other endpoints), or disabled."""
    if value is None:
        return None, None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "disabled":
        return None, None
    if kind == "adaptive":
        return None, "medium"
    if kind == "enabled":
        budget = value.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
            raise bad_body(
                "thinking.budget_tokens must be a whole number of at least 1024.",
                "thinking.budget_tokens",
            )
        return budget, None
    raise bad_body("thinking.type must be enabled, adaptive or disabled.", "thinking.type")
