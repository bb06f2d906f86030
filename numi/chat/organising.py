"""Organising chats: pins, archive, tags and bulk actions (with undo).

Every function takes the owner's user id and touches only that user's chats. Pinned chats
head the sidebar in their own group; archived chats leave the sidebar but stay found by
search and listed in the Archived view; tags filter the sidebar. Deletion is soft, so a
bulk delete can be undone for `UNDO_SECONDS`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select

from ..errors import invalid, turn_running
from ..extensions import db
from ..models import Chat, ChatTag, utcnow
from .chats import get_chat

MAX_TAGS = 10
MAX_TAG_CHARS = 40
MAX_BULK = 500
# The toast offers Undo for a few seconds; the server allows a little more, so an Undo
# clicked as the toast fades (or sent by a slow client) still lands.
UNDO_SECONDS = 60
BULK_ACTIONS = ("pin", "unpin", "archive", "unarchive", "delete", "restore")


def clean_tags(value: Any) -> list[str]:
    """Tags from a list (JSON) or comma-separated text (a form): trimmed, without repeats
    (case-insensitively, the first spelling wins), at most MAX_TAGS of MAX_TAG_CHARS each."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise invalid("tags must be a list of texts (or comma-separated text).", "invalid_tags")
    tags, seen = [], set()
    for raw in value:
        tag = " ".join(raw.replace(",", " ").split())
        if not tag or tag.casefold() in seen:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise invalid(f"A tag may have at most {MAX_TAG_CHARS} characters.", "invalid_tags")
        seen.add(tag.casefold())
        tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise invalid(f"A chat may have at most {MAX_TAGS} tags.", "invalid_tags")
    return tags


def validate(fields: dict[str, Any]) -> dict[str, Any]:
    """The organising part of a chat update (`pinned`, `archived`, `tags`), checked before
    anything is written; other keys are left to `chats.update_chat`."""
    changes: dict[str, Any] = {}
    for key in ("pinned", "archived"):
        if key in fields:
            if not isinstance(fields[key], bool):
                raise invalid(f"{key} must be true or false.")
            changes[key] = fields[key]
    if "tags" in fields:
        changes["tags"] = clean_tags(fields["tags"])
    return changes


def apply(user_id: int, chat: Chat, changes: dict[str, Any]) -> None:
    """Apply validated changes to the user's chat (caller commits)."""
    now = utcnow()
    if "pinned" in changes:
        chat.pinned_at = (chat.pinned_at or now) if changes["pinned"] else None
    if "archived" in changes:
        chat.archived_at = (chat.archived_at or now) if changes["archived"] else None
    if "tags" in changes:
        wanted = changes["tags"]
        keep = {row.tag: row for row in chat.tag_rows}
        chat.tag_rows = [keep.get(tag) or ChatTag(tag=tag, user_id=user_id) for tag in wanted]


def organise(user_id: int, chat_id: str, fields: dict[str, Any]) -> Chat:
    """Pin/unpin, archive/restore or retag one chat."""
    changes = validate(fields)
    chat = get_chat(user_id, chat_id)
    apply(user_id, chat, changes)
    db.session.commit()
    return chat


def restorable(user_id: int, chat_id: str) -> bool:
    """Whether the user's chat was deleted recently enough for `restore` to undo it."""
    found = db.session.execute(
        select(Chat.id).where(
            Chat.user_id == user_id,
            Chat.id == chat_id,
            Chat.deleted_at >= utcnow() - timedelta(seconds=UNDO_SECONDS),
        )
    ).first()
    return found is not None


def bulk(
    user_id: int, action: Any, ids: Any, running: set[str] | frozenset = frozenset()
) -> list[str]:
    """Apply `action` to those of `ids` that are the user's chats; returns the ids changed.

    `restore` undoes a delete made within UNDO_SECONDS; `delete` refuses (changing nothing)
    when one of the chats is answering (`running`: the ids with a live turn)."""
    if action not in BULK_ACTIONS:
        raise invalid(f"action must be one of: {', '.join(BULK_ACTIONS)}.", "invalid_action")
    if (
        not isinstance(ids, list)
        or not all(isinstance(i, str) and len(i) <= 36 for i in ids)
        or not ids
    ):
        raise invalid("ids must be a non-empty list of chat ids.", "invalid_ids")
    if len(ids) > MAX_BULK:
        raise invalid(f"At most {MAX_BULK} chats at once.", "too_many")
    now = utcnow()
    stmt = select(Chat).where(Chat.user_id == user_id, Chat.id.in_(ids))
    if action == "restore":
        stmt = stmt.where(Chat.deleted_at >= now - timedelta(seconds=UNDO_SECONDS))
    else:
        stmt = stmt.where(Chat.deleted_at.is_(None))
    chats = list(db.session.execute(stmt).scalars())
    if action == "delete" and any(chat.id in running for chat in chats):
        raise turn_running()
    for chat in chats:
        if action == "delete":
            chat.deleted_at = now
        elif action == "restore":
            chat.deleted_at = None
        else:
            apply(
                user_id,
                chat,
                {
                    "pinned" if action in ("pin", "unpin") else "archived": action
                    in ("pin", "archive")
                },
            )
    db.session.commit()
    return [chat.id for chat in chats]


def user_tags(user_id: int) -> list[str]:
    """Every tag the user has on a live chat, for the sidebar filter (one indexed query)."""
    return sorted(
        db.session.execute(
            select(ChatTag.tag)
            .join(Chat, Chat.id == ChatTag.chat_id)
            .where(ChatTag.user_id == user_id, Chat.deleted_at.is_(None))
            .distinct()
        ).scalars(),
        key=str.casefold,
    )
