"""What a model's server has told us about its prompts: token estimates that learn.

Numi estimates a prompt per script (`chat.context.estimate_tokens`, `chat.token_estimate`)
plus its tools block. A model's tokenizer can differ a lot from that, so each answer keeps
in its meta the estimate of the request it answered (`prompt_estimate`) next to the
prompt tokens the server reported (`usage.input_tokens`). The ratio of the two calibrates
the next estimate for that model. A context-overflow answer that states its numbers
(llama-server's `"n_prompt_tokens":479,"n_ctx":256`, or the same in OpenAI's, vLLM's or
Anthropic's message text) gives both a ratio and the server's real window.

Where the numbers live: the chat's own newest answers of the model (read from the
database, so every process and every restart sees them). A window a server stated is also
kept per process for the endpoint's model, so other chats on it budget for it too.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select

from ..extensions import db
from ..models import Message

# A ratio outside this range is a server that reports nonsense (a fixed or zero usage, an
# error message's canned numbers), not a tokenizer: such a report is ignored.
MIN_RATIO, MAX_RATIO = 0.25, 4.0
_RECENT_ANSWERS = 20
_messages = Message.__table__.c
# Built once: every turn reads it (the chat's newest answers of the model, their meta).
_RECENT_META = (
    select(_messages.meta_json)
    .where(
        _messages.chat_id == bindparam("chat_id"),
        _messages.role == "assistant",
        _messages.model == bindparam("model"),
        _messages.deleted_at.is_(None),
    )
    .order_by(_messages.id.desc())
    .limit(_RECENT_ANSWERS)
)


@dataclass(frozen=True)
class Calibration:
    """How to turn a character estimate into this model's tokens, and its real window."""

    ratio: float = 1.0  # reported prompt tokens / Numi's estimate of the same request
    source: str = "characters"  # "characters" | "reported" | "overflow"
    reported: int | None = None  # the prompt tokens the server stated
    estimated: int | None = None  # Numi's estimate of that same request
    window: int | None = None  # the context size the server stated in an overflow

    def apply(self, raw: int) -> int:
        """A raw (character) estimate in this model's tokens."""
        return max(0, round(raw * self.ratio))

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ratio": round(self.ratio, 3),
            "reported_prompt_tokens": self.reported,
            "estimated_prompt_tokens": self.estimated,
            "server_context_window": self.window,
        }


_windows: dict[tuple[int, str], int] = {}
_lock = threading.Lock()


def _ratio(reported: Any, estimated: Any) -> float | None:
    if not (isinstance(reported, int) and isinstance(estimated, int)):
        return None
    if reported <= 0 or estimated <= 0:
        return None
    ratio = reported / estimated
    return ratio if MIN_RATIO <= ratio <= MAX_RATIO else None


def _part(meta: dict[str, Any], key: str) -> dict[str, Any]:
    """One object of an answer's meta; an empty one when it is missing or malformed."""
    value = meta.get(key)
    return value if isinstance(value, dict) else {}


def from_meta(meta: dict[str, Any]) -> Calibration | None:
    """The calibration an answer's meta carries, if it has the numbers."""
    estimate = meta.get("prompt_estimate")
    overflow = _part(meta, "overflow")
    usage = _part(meta, "usage")
    if usage.get("estimated"):  # Numi's own numbers for an answer cut short, no server's
        usage = {}
    window = overflow.get("context_window")
    window = window if isinstance(window, int) and window > 0 else None
    ratio = _ratio(usage.get("input_tokens"), estimate)
    if ratio is not None:
        return Calibration(ratio, "reported", usage["input_tokens"], estimate, window)
    ratio = _ratio(overflow.get("prompt_tokens"), overflow.get("estimate"))
    if ratio is not None:
        return Calibration(
            ratio, "overflow", overflow["prompt_tokens"], overflow["estimate"], window
        )
    if window and not overflow.get("prompt_tokens"):
        return Calibration(window=window)
    return None  # numbers that do not fit Numi's own estimate are not believed


def learn(endpoint_id: int, model: str, meta: dict[str, Any]) -> None:
    """Remember in this process the window a server stated for a model, so that every
    chat on it budgets for it (ratios stay per chat: they depend on what a chat holds)."""
    found = from_meta(meta)
    if found is not None and found.window:
        with _lock:
            _windows[(endpoint_id, model)] = found.window


def calibration(chat_id: str | None, endpoint_id: int | None, model: str | None) -> Calibration:
    """The newest calibration for `model` from the chat's newest answers of that model
    (none: ratio 1, the character estimate), with the window its server stated in this
    chat or, as this process heard, in any other."""
    if not model:
        return Calibration()
    ratio_from: Calibration | None = None
    window: int | None = None
    if chat_id:
        rows = db.session.execute(_RECENT_META, {"chat_id": chat_id, "model": model}).scalars()
        for raw in rows:
            found = from_meta(_loads(raw))
            if found is None:
                continue
            if ratio_from is None and found.source != "characters":
                ratio_from = found
            window = window or found.window
            if ratio_from is not None and window:
                break
    if window is None and endpoint_id is not None:
        with _lock:
            window = _windows.get((endpoint_id, model))
    if ratio_from is None:
        return Calibration(window=window)
    return Calibration(
        ratio_from.ratio, ratio_from.source, ratio_from.reported, ratio_from.estimated, window
    )


def tool_schemas(tools: list[Any]) -> str:
    """The tools block as the JSON a provider is sent (name, description, parameters)."""
    return json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools],
        separators=(",", ":"),
    )


def tools_estimate(tools: list[Any]) -> int:
    """A raw estimate of the tools block: JSON is denser in tokens than prose (its quotes,
    braces and short keys are tokens of their own), about three characters a token, plus
    a few tokens of framing per tool."""
    if not tools:
        return 0
    return len(tool_schemas(tools)) // 3 + 8 * len(tools)


def _loads(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
