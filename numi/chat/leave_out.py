"""Leaving messages out of the model's context without deleting them.

A left-out message stays in the transcript (marked) and no request carries it
(`ChatContextService` loads only messages `in_context`). A tool step leaves and returns
as one group, the assistant message that called tools together with every result of its
calls, so no request ever carries a tool result without its call or a call without its
results.
"""

from __future__ import annotations

from sqlalchemy import func, select

from ..errors import NotFound, invalid
from ..extensions import db
from ..models import Chat, Message


def tool_group(chat_id: str, message: Message) -> list[Message]:
    """The messages that leave the context together with `message`: itself, or for a tool
    step (the calling assistant message or one of its results) the call and its results."""
    caller = message
    if message.role == "tool" and message.tool_call_id:
        caller = _caller_of(chat_id, message)
        if caller is None:
            return [message]
    calls = [c.get("id") for c in caller.tool_calls or () if isinstance(c, dict)]
    if caller.role != "assistant" or not calls:
        return [message]
    results = list(
        db.session.execute(
            select(Message).where(
                Message.chat_id == chat_id,
                Message.shown(),
                Message.role == "tool",
                Message.id > caller.id,
                Message.tool_call_id.in_(calls),
            )
        ).scalars()
    )
    return [caller, *results]


def _caller_of(chat_id: str, result: Message) -> Message | None:
    """The newest assistant message before `result` that called its tool call id."""
    rows = db.session.execute(
        select(Message)
        .where(
            Message.chat_id == chat_id,
            Message.shown(),
            Message.role == "assistant",
            Message.id < result.id,
            Message.tool_calls_json.is_not(None),
        )
        .order_by(Message.id.desc())
        .limit(50)
    ).scalars()
    for row in rows:
        if any(isinstance(c, dict) and c.get("id") == result.tool_call_id for c in row.tool_calls):
            return row
    return None


def set_in_context(chat: Chat, message_id: int, value) -> list[int]:
    """Leave message `message_id` of `chat` out of the context (False) or bring it back
    (True), with its tool group; returns the ids changed. The message must be in the
    transcript: another chat's, a deleted or an inactive version's id is a 404."""
    if not isinstance(value, bool):
        raise invalid("in_context must be true or false.", "invalid_in_context")
    message = db.session.execute(
        select(Message).where(Message.id == message_id, Message.chat_id == chat.id, Message.shown())
    ).scalar_one_or_none()
    if message is None:
        raise NotFound()
    group = tool_group(chat.id, message)
    for row in group:
        row.in_context = value
    db.session.commit()
    return [row.id for row in group]


def left_out_count(chat_id: str) -> int:
    """How many messages of the transcript the user left out of the context."""
    return db.session.execute(
        select(func.count(Message.id)).where(
            Message.chat_id == chat_id, Message.shown(), Message.in_context.is_(False)
        )
    ).scalar_one()


def left_out_messages(chat_id: str, limit: int = 200) -> list[Message]:
    """The newest left-out messages of the transcript, oldest first (the context panel)."""
    rows = list(
        db.session.execute(
            select(Message)
            .where(Message.chat_id == chat_id, Message.shown(), Message.in_context.is_(False))
            .order_by(Message.id.desc())
            .limit(limit)
        ).scalars()
    )
    rows.reverse()
    return rows
