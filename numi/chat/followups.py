"""Queued follow-ups: messages sent while a turn runs, waiting to start after it.

They live in the database (`queued_messages`), not in the process: the turn that ends
starts the next one even when no browser is open, and a restart keeps them (shown as
paused until the user resumes). Every function takes the owner's user id; a foreign or
missing item is NotFound. Starting one is numi.agent.sending's job (`start_next`, through
the one turn-start path), also from the end-of-turn hook.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, func, select

from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import QueuedMessage
from ..models.columns import loads

MAX_QUEUED = 20  # per chat: a queue is a few follow-ups, not a batch job


def check_text(message: Any, max_chars: int) -> str:
    """The rules of a send's text, shared by sends, queued items and their edits."""
    if not isinstance(message, str) or not message.strip():
        raise invalid("Write a message first.", "empty_message")
    if len(message) > max_chars:
        raise invalid(f"The message is too long (at most {max_chars} characters).", "too_long")
    return message


def list_items(user_id: int, chat_id: str) -> list[QueuedMessage]:
    return list(
        db.session.execute(
            select(QueuedMessage)
            .where(QueuedMessage.chat_id == chat_id, QueuedMessage.user_id == user_id)
            .order_by(QueuedMessage.id)
        ).scalars()
    )


def get_item(user_id: int, chat_id: str, item_id: int) -> QueuedMessage:
    item = db.session.execute(
        select(QueuedMessage).where(
            QueuedMessage.id == item_id,
            QueuedMessage.chat_id == chat_id,
            QueuedMessage.user_id == user_id,
        )
    ).scalar_one_or_none()
    if item is None:
        raise NotFound("queued message")  # started already, removed, or never the user's
    return item


def add(
    user_id: int,
    chat_id: str,
    *,
    message: str,
    attachments: list[int],
    request_id: str,
    timezone: str | None,
    tz_offset: int | None,
    exempt: list[str] | None = None,
) -> QueuedMessage:
    """Queue a follow-up. The same request_id again is the same item (a resend after a lost
    connection), never a second one. `exempt`: what the send lets through unredacted, kept
    for its own turn."""
    same = db.session.execute(
        select(QueuedMessage).where(
            QueuedMessage.chat_id == chat_id, QueuedMessage.request_id == request_id
        )
    ).scalar_one_or_none()
    if same is not None:
        if same.user_id != user_id or same.content.strip() != message.strip():
            raise NumiError(
                "request_id_reused",
                "This request_id was used for another message; send a new request_id.",
                409,
            )
        return same
    count = db.session.execute(
        select(func.count()).select_from(QueuedMessage).where(QueuedMessage.chat_id == chat_id)
    ).scalar_one()
    if count >= MAX_QUEUED:
        raise NumiError(
            "queue_full", f"At most {MAX_QUEUED} messages can wait in a chat's queue.", 409
        )
    item = QueuedMessage(
        chat_id=chat_id,
        user_id=user_id,
        content=message,
        request_id=request_id,
        timezone=timezone,
        tz_offset=tz_offset,
    )
    item.attachments = attachments
    if exempt:
        item.exempt = exempt
    db.session.add(item)
    db.session.commit()
    return item


def edit(user_id: int, chat_id: str, item_id: int, message: Any, max_chars: int) -> QueuedMessage:
    item = get_item(user_id, chat_id, item_id)
    item.content = check_text(message, max_chars)
    db.session.commit()
    return item


def remove(user_id: int, chat_id: str, item_id: int) -> None:
    db.session.delete(get_item(user_id, chat_id, item_id))
    db.session.commit()


def clear(chat_id: str) -> int:
    """Drop a chat's queue (Stop and clear, a deleted chat); the caller checked the owner."""
    removed = db.session.execute(
        delete(QueuedMessage).where(QueuedMessage.chat_id == chat_id)
    ).rowcount
    db.session.commit()
    return removed or 0


_queued = QueuedMessage.__table__.c
# Built once: every turn's end asks for the chat's next follow-up.
_FIRST_QUEUED = (
    select(QueuedMessage.__table__)
    .where(_queued.chat_id == bindparam("chat_id"))
    .order_by(_queued.id)
    .limit(1)
)
_DELETE_QUEUED = delete(QueuedMessage.__table__).where(_queued.id == bindparam("item_id"))


def take_next(chat_id: str) -> dict[str, Any] | None:
    """Remove the chat's first item and return what starting it needs. Deleted before it
    starts: a crash in between loses a follow-up rather than sending it twice."""
    item = db.session.execute(_FIRST_QUEUED, {"chat_id": chat_id}).first()
    if item is None:
        db.session.commit()
        return None
    taken = {
        "id": item.id,
        "chat_id": item.chat_id,
        "user_id": item.user_id,
        "message": item.content,
        "attachments": loads(item.attachments_json, []),
        "request_id": item.request_id,
        "timezone": item.timezone,
        "tz_offset": item.tz_offset,
        "exempt": loads(item.exempt_json, []),
    }
    db.session.execute(_DELETE_QUEUED, {"item_id": item.id})
    db.session.commit()
    return taken


def put_back(taken: dict[str, Any]) -> None:
    """Return an item `take_next` took but could not start (another turn began first),
    under its old id, so it keeps its place at the head of the queue."""
    item = QueuedMessage(
        id=taken["id"],
        chat_id=taken["chat_id"],
        user_id=taken["user_id"],
        content=taken["message"],
        request_id=taken["request_id"],
        timezone=taken["timezone"],
        tz_offset=taken["tz_offset"],
    )
    item.attachments = taken["attachments"]
    if taken.get("exempt"):
        item.exempt = taken["exempt"]
    db.session.add(item)
    db.session.commit()
