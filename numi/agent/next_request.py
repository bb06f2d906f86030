"""The next request, laid open: what the chat's next model request will carry, part by part.

`describe` builds the same request the turn would (system parts from `system_parts`, the
history with its checkpoint summary from `ChatContextService`, attachments, the tools
block when the model takes tools) and counts each part. The total is the turn's own
estimate: characters (and the tools block's JSON) calibrated by what the model's server
reported of earlier requests (`agent.calibration`), and the window is the smaller of the
model listing's and the one the server stated when it refused a prompt. It contacts no
provider. Parts, in the order the model reads them:

- `system_prompt` (the chat's prompt and the date line), `project_instructions`,
  `memories`: from `system_parts`, present with 0 tokens when empty;
  `documents`: the passages of the chat's documents for its newest question (with `items`:
  each passage's source, score and why it was found), only when it uses them automatically;
- `summary`: the compaction summary the request starts with;
- `history`: the messages included, and those omitted (by the history budget) and left
  out (by the user), each with its count;
- `attachments`: the files the included messages carry, each with its text;
- `tools`: the tool schemas.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import select

from ..chat.attachments import attachments_by_id, message_attachment_ids, text_sizes
from ..chat.context import ChatContextService, estimate_tokens, message_chars
from ..chat.leave_out import left_out_count, left_out_messages
from ..chat.redactions import ON_THE_HUB_CHARS
from ..chat.usage import cache_discount, model_prices
from ..cpu_pool import run_cpu
from ..errors import NumiError
from ..extensions import db
from ..models import Chat, Endpoint, Message
from ..providers.capabilities import listed_capabilities
from ..redaction.placeholders import matches
from ..redaction.rules import rules_for
from ..services import services
from .calibration import Calibration, calibration, tool_schemas, tools_estimate
from .system_context import SystemPart, system_parts, system_text

PART_KINDS = (
    "system_prompt",
    "project_instructions",
    "memories",
    "documents",
    "summary",
    "history",
    "attachments",
    "tools",
)
_FRAMING = 4  # tokens of framing per message, as estimate_tokens counts them
# The characters of an attached file's text the panel shows (its marks beyond are counted).
PANEL_TEXT_CHARS = 20_000


def describe(
    app,
    *,
    chat: Chat,
    endpoint: Endpoint | None,
    is_admin: bool,
    now: datetime,
    detail: bool = True,
) -> dict[str, Any]:
    """The chat's next request as parts with tokens, its total, window and price; without
    `detail` (the gauge) the left-out messages themselves are not read, only counted."""
    config = app.config
    service = ChatContextService(
        chat.id,
        chat.user_id,
        max_messages=config["PROMPT_MAX_HISTORY_MESSAGES"],
        max_chars=config["PROMPT_MAX_HISTORY_CHARS"],
    )
    caps = listed_capabilities(chat.model, endpoint.models) if endpoint and chat.model else None
    cal = calibration(chat.id, endpoint.id if endpoint else None, chat.model)
    listed = (caps.context_window if caps else None) or config["NUMI_DEFAULT_CONTEXT_WINDOW"]
    window = min(listed, cal.window) if cal.window else listed
    checkpoint = service.latest_checkpoint()
    info: dict[str, Any] = {
        "model": chat.model,
        "context_window": window,
        "window_assumed": not (caps and caps.context_window) and not cal.window,
        "listed_context_window": (caps.context_window if caps else None),
        "auto_compact_at": int(window * config["NUMI_AUTO_COMPACT_FRACTION"]),
        "auto_compact": chat.settings.get("auto_compact", config["NUMI_AUTO_COMPACT"]),
        "checkpoint_id": checkpoint.id if checkpoint else None,
        "estimate": {**cal.to_dict(), "label": estimate_label(cal)},
        "error": None,
    }
    described = system_parts(user_id=chat.user_id, chat_id=chat.id, settings=chat.settings, now=now)
    parts = system_part_list(chat, now, cal, described)
    system = system_text(described)
    tools = _tools(app, chat, is_admin, caps)
    tools_raw = tools_estimate(tools)
    try:
        history = service.history()
    except NumiError as exc:
        info.update(
            parts=parts,
            estimated_tokens=None,
            messages_included=0,
            messages_omitted=None,
            messages_left_out=left_out_count(chat.id),
            estimated_cost=None,
            error=exc.to_dict(),
        )
        return info
    summary = [m for m in history.messages if m.get("_checkpoint")]
    included = [m for m in history.messages if not m.get("_checkpoint")]
    parts.append(
        {
            "kind": "summary",
            "tokens": cal.apply(_message_tokens(summary)),
            "text": summary[0]["content"] if summary else "",
            "checkpoint_id": history.checkpoint_id,
        }
    )
    parts.append(_history_part(chat.id, included, history.omitted, cal, detail))
    parts.append(_attachments_part(included, chat.user_id, cal))
    parts.append(
        {
            "kind": "tools",
            "tokens": cal.apply(tools_raw),
            "count": len(tools),
            "items": [{"name": t.name, "tokens": cal.apply(tools_estimate([t]))} for t in tools],
            "text": json.dumps(json.loads(tool_schemas(tools)), indent=2) if tools else "",
        }
    )
    tokens = cal.apply(estimate_tokens(history.messages, system) + tools_raw)
    info.update(
        parts=parts,
        estimated_tokens=tokens,
        messages_included=parts[-3]["included"],
        messages_omitted=history.omitted,
        messages_left_out=parts[-3]["left_out"],
        fraction=round(tokens / window, 4),
        estimated_cost=_cost(chat, tokens),
    )
    if detail and endpoint is not None:
        info["redaction"] = _mark_redactions(parts, endpoint)
    for item in parts[-2]["items"]:  # files: their beginning is shown, all of it was checked
        item["chars"] = len(item["text"] or "")
        item["text"] = (item["text"] or "")[:PANEL_TEXT_CHARS] if detail else None
    if endpoint is not None and included:
        info["cache"] = _expected_cache(chat, endpoint, parts, tokens)
    return info


# OpenAI and most compatible servers cache a prompt's prefix from this many tokens on.
OPENAI_CACHE_MIN_TOKENS = 1024


# The order a provider reads a request in, for its prefix cache: the tools first (Anthropic
# renders them before the system prompt; OpenAI's cached prefix includes them), then the
# system context, the summary and the history, whose attachments are in its messages.
CACHE_ORDER = ("tools", *(kind for kind in PART_KINDS if kind != "tools"))
# Parts built anew for each question: the passages found for it. The prefix a cache can
# serve ends before the first of them.
PER_QUESTION = frozenset({"documents"})


def _expected_cache(
    chat: Chat, endpoint: Endpoint, parts: list[dict[str, Any]], tokens: int
) -> dict[str, Any] | None:
    """What of the next request should be read from the provider's cache, part by part:
    each part up to the first one built anew for the question (the last request wrote
    them), but not the question still to be typed; and its input price with the cache
    discount. Each part gets `cache`: `expected` (read from the cache next time) and
    `served_tokens` (of the last answer's cached tokens, laid over the parts in the order
    the provider reads them: an estimate). None when nothing is expected (caching off for
    the endpoint, or a prefix too short for automatic caching)."""
    if endpoint.kind == "anthropic":
        if endpoint.settings.get("prompt_caching", True) is False:
            return None
    elif tokens < OPENAI_CACHE_MIN_TOKENS:
        return None
    served = last_cached_tokens(chat.id)
    remaining, stable, expected = served or 0, True, 0
    for part in sorted(parts, key=lambda p: _cache_position(p["kind"])):
        stable = stable and part["kind"] not in PER_QUESTION
        part_tokens = part["tokens"]
        taken = min(part_tokens, remaining) if stable else 0
        remaining -= taken
        part["cache"] = {
            "expected": stable and part_tokens > 0,
            "served_tokens": taken if served is not None else None,
        }
        expected += part_tokens if stable else 0
    # The parts are counted apart and rounded: a request cached whole is its own estimate.
    expected = tokens if stable else min(expected, tokens)
    price = model_prices(chat.user_id).get(chat.model or "")
    cost = None
    if price is not None:
        discount = cache_discount(chat.model or "")
        full = tokens - expected
        cost = round((expected * (1 - discount) + full) / 1e6 * price.input_per_mtok, 6)
    return {"expected_tokens": expected, "estimated_cost": cost, "last_served_tokens": served}


def _cache_position(kind: str) -> int:
    return CACHE_ORDER.index(kind) if kind in CACHE_ORDER else len(CACHE_ORDER)


def last_cached_tokens(chat_id: str) -> int | None:
    """The input tokens the chat's last answer read from the provider's cache (None: no
    answer yet, or its provider reported none)."""
    return db.session.execute(
        select(Message.cached_tokens)
        .where(Message.chat_id == chat_id, Message.role == "assistant")
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar()


def _mark_redactions(parts: list[dict[str, Any]], endpoint: Endpoint) -> dict[str, Any]:
    """Where the endpoint's privacy gateway will replace text in the next request: each
    text gets `segments` ([text, label or None], the panel marks the labelled ones) and
    each part `redacted` (items by label); the total by label is returned."""
    rules = rules_for(endpoint.settings.get("redaction"), endpoint.base_url)
    if not rules.enabled:
        return {"enabled": False, "items": 0, "by_label": {}}
    total: Counter[str] = Counter()

    def mark(holder: dict[str, Any], counts: Counter[str], key: str = "text") -> None:
        text = holder.get(key) or ""
        # A long text (an attached book) is searched in the CPU pool, off the hub.
        spans = (
            run_cpu(matches, text, rules) if len(text) > ON_THE_HUB_CHARS else matches(text, rules)
        )
        if not spans:
            return
        segments, last = [], 0
        for start, end, label in spans:
            counts[label] += 1
            if start < PANEL_TEXT_CHARS:  # the panel shows a text's beginning; all is counted
                segments += [[text[last:start], None], [text[start:end], label]]
                last = end
        tail = text[last:PANEL_TEXT_CHARS] if last < PANEL_TEXT_CHARS else ""
        holder["segments" if key == "text" else f"{key}_segments"] = [*segments, [tail, None]]

    for part in parts:
        counts: Counter[str] = Counter()
        if part["kind"] == "attachments":
            # Each file's name and text, as the request carries them (document parts).
            for item in part["items"]:
                mark(item, counts, "name")
                mark(item, counts)
        else:
            for holder in part.get("messages") or [part]:
                mark(holder, counts)
            if part["kind"] == "documents":
                # Counted above as the request carries the passages; marked again one by
                # one, as the panel lists them.
                for item in part["items"]:
                    mark(item, Counter())
        part["redacted"] = dict(counts)
        total += counts
    return {"enabled": True, "items": sum(total.values()), "by_label": dict(total)}


def estimate_label(cal: Calibration) -> str:
    """Which estimate the numbers are, in words (the context panel shows it)."""
    if cal.source == "reported":
        return (
            f"Calibrated on this model's own count: it reported {cal.reported:,} prompt tokens "
            f"for a request estimated at {cal.estimated:,}."
        )
    if cal.source == "overflow":
        return (
            f"Calibrated on the server's refusal: it counted {cal.reported:,} tokens for a "
            f"request estimated at {cal.estimated:,}."
        )
    return (
        "Estimated from characters, per script (an English word or a CJK character about a "
        "token, code's symbols their own; tool schemas three characters a token): rough until "
        "an answer of this model reports its prompt tokens."
    )


def system_part_list(
    chat: Chat, now: datetime, cal: Calibration, parts: list[SystemPart] | None = None
) -> list[dict[str, Any]]:
    """The system context's parts with tokens; the date line belongs to `system_prompt`.
    A `documents` part (only when the chat uses its documents automatically) lists its
    passages as `items`."""
    if parts is None:
        parts = system_parts(user_id=chat.user_id, chat_id=chat.id, settings=chat.settings, now=now)
    by_kind: dict[str, list[str]] = {}
    items: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        kind = "system_prompt" if part.kind == "clock" else part.kind
        by_kind.setdefault(kind, []).append(part.text)
        items.setdefault(kind, []).extend(part.items)
    out = []
    for kind in ("system_prompt", "project_instructions", "memories"):
        text = "\n\n".join(by_kind.pop(kind, []))
        out.append({"kind": kind, "tokens": cal.apply(len(text) // 4), "text": text})
    for kind, texts in by_kind.items():  # a kind added later still shows, under its name
        text = "\n\n".join(texts)
        part_dict = {"kind": kind, "tokens": cal.apply(len(text) // 4), "text": text}
        if items.get(kind):
            part_dict["items"] = items[kind]
        out.append(part_dict)
    return out


def _message_tokens(messages: list[dict[str, Any]]) -> int:
    """Raw tokens of messages without their attachments (the attachments part has those)."""
    return sum((message_chars(m) - m.get("_attachment_chars", 0)) // 4 + _FRAMING for m in messages)


def _history_part(
    chat_id: str, included: list[dict[str, Any]], omitted: int, cal: Calibration, detail: bool
) -> dict[str, Any]:
    left_out_rows = left_out_messages(chat_id) if detail else []
    items = [
        {
            "id": m.get("_db_id"),
            "role": m["role"],
            "tokens": cal.apply(_message_tokens([m])),
            "text": _message_text(m),
            "in_context": True,
        }
        for m in included
    ]
    return {
        "kind": "history",
        "tokens": cal.apply(_message_tokens(included)),
        "included": sum(1 for m in included if not (m.get("_notice") or m.get("_placeholder"))),
        "omitted": omitted,
        "left_out": left_out_count(chat_id),
        "messages": items,
        "left_out_messages": [
            {
                "id": row.id,
                "role": row.role,
                "text": _message_text({"content": row.content, "tool_calls": row.tool_calls}),
                "in_context": False,
            }
            for row in left_out_rows
        ],
    }


def _message_text(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    calls = [
        f"[tool call {c.get('function', {}).get('name', '?')}({c.get('function', {}).get('arguments', '')})]"
        for c in message.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return "\n".join([text, *calls]).strip()


def _attachments_part(
    included: list[dict[str, Any]], user_id: int, cal: Calibration
) -> dict[str, Any]:
    ids = [i for m in included for i in message_attachment_ids(m.get("_content_parts"))]
    rows = {i: a for i, a in attachments_by_id(ids).items() if a.user_id == user_id}
    sizes = text_sizes(list(rows))
    items = [
        {
            "id": i,
            "name": rows[i].filename,
            "mime": rows[i].mime,
            "tokens": cal.apply(sizes.get(i, 0) // 4),
            # The text the request carries (None: an image, or a file the model cannot read).
            "text": rows[i].extracted_text,
        }
        for i in ids
        if i in rows
    ]
    return {
        "kind": "attachments",
        "tokens": sum(item["tokens"] for item in items),
        "items": items,
        "text": "\n".join(f"{item['name']} ({item['mime']})" for item in items),
    }


def _tools(app, chat: Chat, is_admin: bool, caps) -> list[Any]:
    if caps is not None and not caps.tools:
        return []  # the model takes no tools: the request carries none
    registry = services(app).tools
    return registry.active(
        chat.settings.get("tools"),
        is_admin=is_admin,
        user_id=chat.user_id,
        temporary=chat.temporary,
    )


def _cost(chat: Chat, tokens: int) -> float | None:
    """The input price of the request where the model has a price (Usage → prices)."""
    price = model_prices(chat.user_id).get(chat.model or "")
    if price is None:
        return None
    return round(tokens / 1e6 * price.input_per_mtok, 6)
