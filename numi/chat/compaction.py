"""Compaction: summarise a chat's older messages into a checkpoint.

A checkpoint changes what the model sees, never the transcript: history loading
(`ChatContextService`) starts with the checkpoint's summary and continues with the
original messages after its boundary. The boundary always falls between whole turns, so
the kept part starts with a user message and no tool call is split from its results.

The summary is written by the chat's model (or NUMI_COMPACT_MODEL). No database
transaction is open while it streams.

A summary request is never larger than the model's window allows (`Budget`): a part too
long for one request is summarised in pieces, oldest first, each piece's request carrying
the summary so far (issue 44: a 553-token request to a 256-token window). Past
`MAX_PIECES` the earliest part is left out, as a character-bounded transcript leaves it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
from sqlalchemy import select

from ..errors import NumiError
from ..extensions import db
from ..models import Checkpoint, Message
from ..providers import ChatRequest
from ..providers.events import StreamError, TextDelta
from .context import (
    ChatContextService,
    _count_attachments,
    _group_turns,
    _is_error_placeholder,
    estimate_tokens,
    to_internal,
)
from .token_estimate import text_tokens

SUMMARY_SYSTEM = (
    "You compact a conversation between a user and an assistant so that it can continue "
    "without the original messages. Write a faithful, dense summary: the user's goals and "
    "preferences, facts and decisions, names, numbers, code and file names that matter, tool "
    "results that later messages rely on, and open questions. Do not invent anything. "
    "Write in the conversation's language. Answer with the summary only."
)
MAX_MESSAGE_CHARS = 6000
SUMMARISE = "Summarise this conversation:\n\n"
EARLIER = "Summary of the conversation before this part:\n{summary}\n"
MAX_PIECES = 8  # summary requests of one compaction at most (a CPU model: minutes each)
MIN_PIECE_TOKENS = 16  # below this a piece holds hardly a sentence: not worth a request


@dataclass(frozen=True)
class Budget:
    """How large a summary request may be: `max_tokens` of the model's tokens, as
    `tokens` counts a text in them (Numi's estimate, calibrated for the model)."""

    max_tokens: int
    tokens: Callable[[str], int] = text_tokens

    @property
    def piece_room(self) -> int:
        """The tokens a piece's text may take: what is left after the instructions and a
        quarter of the budget for the summary so far, which later pieces carry."""
        return self.room(SUMMARISE) - self.max_tokens // 4

    @property
    def too_small(self) -> bool:
        """Whether not even a short piece fits: compacting would only fail."""
        return self.piece_room < MIN_PIECE_TOKENS

    def room(self, *texts: str) -> int:
        """The tokens left for more text in a request that already carries `texts` (and
        the summariser's instructions)."""
        used = self.tokens(SUMMARY_SYSTEM) + sum(self.tokens(text) for text in texts) + 8
        return self.max_tokens - used


@dataclass
class Plan:
    """What a compaction would summarise and keep."""

    previous: Checkpoint | None
    summarise: list[dict[str, Any]]
    keep: list[dict[str, Any]]

    @property
    def through_message_id(self) -> int:
        return self.summarise[-1]["_db_id"]


def plan(context: ChatContextService, keep_messages: int) -> Plan:
    """Split the messages after the last checkpoint into a part to summarise and the newest
    whole turns to keep (at least the last turn and at least `keep_messages` messages when
    there are older turns). Raises nothing_to_compact when there is nothing older."""
    previous = context.latest_checkpoint()
    stmt = select(Message).where(Message.chat_id == context.chat_id, Message.shown())
    if previous is not None:
        stmt = stmt.where(Message.id > previous.through_message_id)
    rows = [
        r
        for r in db.session.execute(stmt.order_by(Message.id)).scalars()
        if not _is_error_placeholder(r)
    ]
    internal = [to_internal(r) for r in rows]
    _count_attachments(internal)
    turns = _group_turns(internal)
    kept: list[list[dict[str, Any]]] = []
    while turns and (not kept or sum(len(g) for g in kept) < keep_messages):
        kept.insert(0, turns.pop())
    if not turns:
        raise NumiError("nothing_to_compact", "There are no older messages to summarise yet.", 409)
    return Plan(previous, [m for g in turns for m in g], [m for g in kept for m in g])


def transcript_text(plan_: Plan, max_chars: int) -> str:
    """The part to summarise as plain text for the summariser (newest part if too long)."""
    lines = transcript_lines(plan_)
    if plan_.previous is not None:
        lines.insert(0, EARLIER.format(summary=plan_.previous.summary))
    text = "\n\n".join(lines)
    if len(text) > max_chars:
        text = "[... earliest part left out]\n" + text[-max_chars:]
    return text


def transcript_lines(plan_: Plan) -> list[str]:
    """Each message to summarise as a line of plain text."""
    lines: list[str] = []
    for message in plan_.summarise:
        role = message["role"]
        text = message.get("content") or ""
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + " [...]"
        if role == "tool":
            lines.append(f"Tool result: {text}")
        elif role == "assistant" and message.get("tool_calls"):
            calls = ", ".join(
                f"{c.get('function', {}).get('name')}({str(c.get('function', {}).get('arguments'))[:500]})"
                for c in message["tool_calls"]
            )
            lines.append(f"Assistant: {text}\n(called tools: {calls})")
        else:
            attached = " (with attachments)" if message.get("_content_parts") else ""
            lines.append(f"{role.capitalize()}{attached}: {text}")
    return lines


def pieces(plan_: Plan, budget: Budget, max_chars: int) -> list[str]:
    """The part to summarise cut into pieces whose requests fit `budget`, oldest first,
    each with room left for the summary of the pieces before it (a quarter of the
    budget). A line too long for a piece of its own is cut to fit; past MAX_PIECES the
    earliest lines are left out. Raises compaction_failed when the window cannot hold
    the summariser's instructions and any text."""
    room = budget.piece_room
    if plan_.previous is not None:
        room = min(room, budget.room(SUMMARISE, EARLIER.format(summary=plan_.previous.summary)))
    if room < MIN_PIECE_TOKENS:
        raise NumiError(
            "compaction_failed",
            "The model's context window is too small to hold a summary request.",
            502,
        )
    out: list[list[str]] = [[]]
    used = 0
    for line in reversed(transcript_lines(plan_)):  # newest first: the earliest may go
        size = budget.tokens(line) + 2
        if size > room:
            line = line[: max(1, len(line) * room // size - 8)] + " [...]"
            size = budget.tokens(line) + 2
        if used + size > room and out[0]:
            if len(out) == MAX_PIECES:
                out[0].insert(0, "[... earliest part left out]")
                break
            out.insert(0, [])
            used = 0
        out[0].insert(0, line)
        used += size
    texts = ["\n\n".join(piece) for piece in out]
    return [text[-max_chars:] for text in texts]


def _earlier(summary: str, budget: Budget, part: str) -> str:
    """The summary so far as a piece's request opens with it, its end cut if the model
    wrote more than the piece left room for."""
    if not summary:
        return ""
    text = EARLIER.format(summary=summary) + "\n"
    over = -budget.room(SUMMARISE, text, part)
    if over > 0:
        size = budget.tokens(text)
        text = text[: max(0, len(text) * (size - over) // size - 8)] + " [...]\n"
    return text


def summarise(adapter, model: str, text: str, *, on_cancel=None) -> str:
    """Ask `model` for the summary; raises NumiError("compaction_failed") on any error."""
    request = ChatRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=[{"role": "user", "content": SUMMARISE + text}],
    )
    stream = adapter.stream(request)
    unregister = on_cancel(stream.close) if on_cancel else None
    parts: list[str] = []
    try:
        for count, event in enumerate(stream, 1):
            if count % 16 == 0:
                gevent.sleep(0)
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, StreamError):
                raise NumiError(
                    "compaction_failed", f"The summary could not be written: {event.message}", 502
                )
    finally:
        if unregister:
            unregister()
        stream.close()
    summary = "".join(parts).strip()
    if not summary:
        raise NumiError("compaction_failed", "The model returned an empty summary.", 502)
    return summary


def compact(
    context: ChatContextService,
    adapter,
    model: str,
    config,
    *,
    on_cancel=None,
    budget: Budget | None = None,
) -> Checkpoint:
    """Summarise the older part of the chat and store a checkpoint with message and token
    counts before and after. The transcript itself is untouched. With a `budget` (the
    model's window is known) no summary request is larger than it."""
    plan_ = plan(context, config["NUMI_COMPACT_KEEP_MESSAGES"])
    before = ([{}, {}] if plan_.previous is not None else []) + plan_.summarise + plan_.keep
    if plan_.previous is not None:
        before[0] = {"role": "user", "content": plan_.previous.summary}
        before[1] = {"role": "assistant", "content": ""}
    max_chars = config["PROMPT_MAX_HISTORY_CHARS"]
    text = transcript_text(plan_, max_chars)
    parts = None
    if budget is not None and budget.room(SUMMARISE, text) < 0:
        parts = pieces(plan_, budget, max_chars)
    through = plan_.through_message_id
    context.release()  # no transaction while the summariser streams
    if parts is None:
        summary = summarise(adapter, model, text, on_cancel=on_cancel)
    else:
        summary = plan_.previous.summary if plan_.previous is not None else ""
        for part in parts:
            summary = summarise(
                adapter, model, _earlier(summary, budget, part) + part, on_cancel=on_cancel
            )
    after = [
        {"role": "user", "content": summary},
        {"role": "assistant", "content": ""},
    ] + plan_.keep
    return context.save_checkpoint(
        summary=summary,
        through_message_id=through,
        messages_before=len(before),
        messages_after=len(after),
        tokens_before=estimate_tokens(before),
        tokens_after=estimate_tokens(after),
    )


def checkpoint_dict(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "id": checkpoint.id,
        "through_message_id": checkpoint.through_message_id,
        "summary": checkpoint.summary,
        "messages_before": checkpoint.messages_before,
        "messages_after": checkpoint.messages_after,
        "tokens_before": checkpoint.tokens_before,
        "tokens_after": checkpoint.tokens_after,
        "created_at": checkpoint.created_at.isoformat() + "Z" if checkpoint.created_at else None,
    }
