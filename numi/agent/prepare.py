"""prepare_messages(): stored transcript -> what may go to a provider.

Input messages are the internal OpenAI-like dicts (role, content, tool_calls,
tool_call_id, reasoning_content, reasoning_details) plus internal fields whose keys
start with "_" (database ids, prepared-file markers). The output is what an adapter's
`ChatRequest.messages` expects: internal fields removed, tool calls paired with results,
and on each assistant message only the reasoning that this provider should receive.

`reasoning_details` on a stored message is the envelope an adapter returned in
`Finish.reasoning_details`: {"format", "model", "items", "field"?}. A bare list (older
data) is read by its item types.

Reasoning replay rules (PROTOCOLS §1.7, §2.4, §3.4). The "current tool loop" is the
assistant messages after the last user message (pass ``continuing_tools=False`` when the
request starts a new user turn and nothing is in a loop).

policy "auto" (default, follows each provider's rules):
  anthropic         signed thinking / redacted_thinking blocks are replayed unmodified
                    on the assistant messages of the current tool loop (mandatory with
                    thinking on); earlier turns' blocks are dropped (the API ignores
                    them, and any history edit such as compaction would invalidate them).
  openai_responses  reasoning items with encrypted_content are replayed on the current
                    tool loop's assistant messages (stateless store:false); items
                    without encrypted_content are never sent (a bare id is a 404);
                    earlier turns' items are dropped (the API drops them anyway).
  openai_chat       OpenAI proper accepts no reasoning and produces none, so nothing
                    is sent for its messages. Reasoning that a compatible server
                    streamed is sent back on assistant messages that carry tool calls,
                    in every later request: in the field the server used
                    (`reasoning_content` for DeepSeek/llama.cpp, `reasoning` for
                    Ollama/vLLM), or as OpenRouter's `reasoning_details` array,
                    unmodified. DeepSeek's thinking mode demands this (400 otherwise);
                    its original R1 rejected reasoning on any message, which is why
                    answers without tool calls never carry it.
  everywhere        reasoning produced by another model (the envelope's model differs
                    from ``model``) or in another provider's format is dropped: signatures
                    and encrypted items are model-scoped, and we never forge them from
                    plain text.

policy "strip": no reasoning is ever sent back. (With Anthropic thinking or DeepSeek
  thinking mode a tool loop may then be refused by the provider; that is the user's call.)
policy "preserve": every assistant message's reasoning is sent wherever the wire format
  can carry it: all turns, not just the tool loop; for openai_chat also plain text
  without a known field (as `reasoning_content`). Model-scoped items from another model
  are still dropped.

A model's reasoning effort setting plays no part: reasoning is never stripped merely
because the model runs in effort mode.
"""

from __future__ import annotations

from typing import Any

POLICIES = ("auto", "strip", "preserve")

_INTERRUPTED_RESULT = "The tool call did not run: the turn was interrupted before it finished."


def prepare_messages(
    messages: list[dict[str, Any]],
    *,
    kind: str,
    reasoning_policy: str = "auto",
    continuing_tools: bool | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Return copies of `messages` fit to send to an endpoint of `kind`
    ("openai_chat" | "openai_responses" | "anthropic"). `model` is the model about to be
    called; reasoning stored from a different model is dropped. Never mutates input."""
    if reasoning_policy not in POLICIES:
        reasoning_policy = "auto"
    cleaned = [{k: v for k, v in message.items() if not k.startswith("_")} for message in messages]
    cleaned = _provider_ids(_pair_tool_results(cleaned))

    last_user = max((i for i, m in enumerate(cleaned) if m.get("role") == "user"), default=-1)
    loop_start = len(cleaned) if continuing_tools is False else last_user + 1

    for position, message in enumerate(cleaned):
        if message.get("role") != "assistant":
            message.pop("reasoning_content", None)
            message.pop("reasoning_details", None)
            continue
        _apply_policy(
            message,
            kind=kind,
            policy=reasoning_policy,
            in_tool_loop=position >= loop_start,
            model=model,
        )
    return cleaned


def reasoning_format(details: Any) -> str | None:
    """The format of a stored reasoning_details value (envelope or bare list)."""
    if isinstance(details, dict):
        return details.get("format")
    if isinstance(details, list) and details and isinstance(details[0], dict):
        kind = str(details[0].get("type", ""))
        if kind in ("thinking", "redacted_thinking"):
            return "anthropic"
        if kind == "reasoning":
            return "openai_responses"
        if kind.startswith("reasoning."):
            return "openrouter"
    return None


def _envelope(details: Any) -> dict[str, Any] | None:
    if isinstance(details, dict):
        return details
    fmt = reasoning_format(details)
    return {"format": fmt, "model": None, "items": details} if fmt else None


def _apply_policy(
    message: dict[str, Any], *, kind: str, policy: str, in_tool_loop: bool, model: str | None
) -> None:
    envelope = _envelope(message.pop("reasoning_details", None))
    text = message.pop("reasoning_content", None)
    if policy == "strip" or (envelope is None and not text):
        return
    fmt = envelope.get("format") if envelope else None
    same_model = not (model and envelope and envelope.get("model") and envelope["model"] != model)
    has_calls = bool(message.get("tool_calls"))

    if kind == "anthropic":
        if fmt == "anthropic" and same_model and (policy == "preserve" or in_tool_loop):
            message["reasoning_details"] = envelope
    elif kind == "openai_responses":
        if (
            envelope is not None  # (a format is only read from an envelope)
            and fmt == "openai_responses"
            and same_model
            and (policy == "preserve" or in_tool_loop)
        ):
            items = [i for i in envelope.get("items") or () if i.get("encrypted_content")]
            if items:
                message["reasoning_details"] = {**envelope, "items": items}
    elif kind == "openai_chat":
        wanted = policy == "preserve" or has_calls
        if fmt in ("openrouter", "openai_chat") and same_model and wanted:
            message["reasoning_details"] = envelope
            if text:
                message["reasoning_content"] = text
        elif policy == "preserve" and text and same_model:
            message["reasoning_content"] = text  # sent as reasoning_content


def _provider_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give calls and results back the provider's own ids (stored as `provider_id` beside
    Numi's `id`, see agent/approvals.py): the provider pairs them by its ids. Pairing above
    used Numi's ids, which stay unique even when a provider repeats one."""
    ids: dict[str | None, str] = {}  # Numi's id (None for a call saved without one)
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                call = dict(call)
                provider_id = call.pop("provider_id", None)
                if provider_id:
                    ids[call.get("id")] = provider_id
                    call["id"] = provider_id
                calls.append(call)
            message["tool_calls"] = calls
        elif message.get("role") == "tool" and message.get("tool_call_id") in ids:
            message["tool_call_id"] = ids[message["tool_call_id"]]
    return messages


def _pair_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every provider answers 400 when a tool call has no result before the next
    user/assistant message, or a result has no call. An interrupted turn can leave
    either behind: answer missing calls with a short result, drop orphan results."""
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []

    def close_open_calls() -> None:
        out.extend(
            {"role": "tool", "tool_call_id": call_id, "content": _INTERRUPTED_RESULT}
            for call_id in open_calls
        )
        open_calls.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") in open_calls:
                open_calls.remove(message["tool_call_id"])
                out.append(message)
            continue
        close_open_calls()
        out.append(message)
        if role == "assistant":
            open_calls = [call["id"] for call in message.get("tool_calls") or () if call.get("id")]
    close_open_calls()
    return out
