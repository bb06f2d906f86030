"""Temporary chats: listed nowhere (sidebar, /api/sessions, search, `export --all`), and
discarded when their user starts another chat or after NUMI_TEMPORARY_CHAT_HOURS without
activity. "Keep this chat" makes one a normal chat.

Discarding is the chat's delete (soft: `deleted_at`), and its messages' text and its
compaction summaries go too: a temporary chat should leave nothing to read behind (files
it was given stay in the user's uploads, as they are the user's, not the chat's). The token counts stay, so usage still
counts what it spent (numi/chat/usage.py counts deleted chats).

The text leaves the database file too, not only the rows: on SQLite the discard overwrites
what it removes with zeros (`secure_delete` for its statements) and then empties the WAL
(numi/database.py). On PostgreSQL the old row versions stay in the table's files until
VACUUM frees their space and new rows reuse it (and in WAL archives and backups): there,
encrypt the disk.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import delete, select, update

from ..database import drop_old_copies, overwriting_deletes
from ..setting_values import parse_bool
from ..errors import NumiError
from ..extensions import db
from ..models import Chat, Checkpoint, Message, QueuedMessage, utcnow

DISCARDED_TITLE = "Temporary chat"


def temporary_flag(value) -> bool:
    """The `temporary` field of a new chat: true or false (JSON or a form's "on"/"1")."""
    return parse_bool(value, "temporary", "invalid_temporary")


def refuse_on_existing(value) -> None:
    """An existing chat cannot become temporary: only `temporary: false` (keep it) is
    accepted on a chat that exists."""
    if temporary_flag(value):
        raise NumiError(
            "temporary_existing",
            "Only a new chat can be temporary; an existing chat can only be kept "
            '({"temporary": false}).',
            400,
        )


def keep(chat: Chat) -> None:
    """Make a temporary chat a normal one (it appears in the sidebar from now on)."""
    chat.temporary = False
    db.session.commit()


def discard_others(user_id: int, keep_id: str | None, is_running: Callable[[str], bool]) -> int:
    """Discard the user's temporary chats other than `keep_id` (the user started another
    chat); a chat whose turn is running stays until it goes idle."""
    ids = db.session.execute(
        select(Chat.id).where(
            Chat.user_id == user_id,
            Chat.temporary.is_(True),
            Chat.deleted_at.is_(None),
            Chat.id != (keep_id or ""),
        )
    ).scalars()
    return _discard([i for i in ids if not is_running(i)])


def expire(hours: float, is_running: Callable[[str], bool]) -> int:
    """Discard every user's temporary chats idle for `hours` (one indexed query when there
    are none)."""
    cutoff = utcnow() - timedelta(hours=hours)
    ids = db.session.execute(
        select(Chat.id).where(
            Chat.temporary.is_(True), Chat.updated_at < cutoff, Chat.deleted_at.is_(None)
        )
    ).scalars()
    return _discard([i for i in ids if not is_running(i)])


def _discard(chat_ids: list[str]) -> int:
    if not chat_ids:
        return 0
    with overwriting_deletes(db.session):
        _erase(chat_ids)
    db.session.commit()
    drop_old_copies(db.engine)
    return len(chat_ids)


def _erase(chat_ids: list[str]) -> None:
    db.session.execute(
        update(Message)
        .where(Message.chat_id.in_(chat_ids))
        .values(
            content=None,
            content_parts_json=None,
            reasoning_content=None,
            reasoning_details_json=None,
            tool_calls_json=None,
            citation_sources_json=None,
        )
    )
    db.session.execute(delete(QueuedMessage).where(QueuedMessage.chat_id.in_(chat_ids)))
    db.session.execute(delete(Checkpoint).where(Checkpoint.chat_id.in_(chat_ids)))
    db.session.execute(
        update(Chat)
        .where(Chat.id.in_(chat_ids))
        .values(deleted_at=utcnow(), title=DISCARDED_TITLE, settings_json=None)
    )
