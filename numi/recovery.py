"""Answers kept on disk while the database could not take them, written back at start.

A turn whose save fails (database down, locked, full) retries while it holds the answer in
memory (numi/agent/durable.py). When that takes longer than NUMI_SAVE_RETRY_SECONDS, the
messages go to one JSON file per turn in `<data dir>/recovery/`, written whole (a temporary
file, fsync, rename), and the log names the file (the user is never shown a server path).
The next start saves them to their chat and removes the file: `upgrade()`, which every
`numi serve` and `numi db upgrade` runs, and each gunicorn worker as it starts
(numi/gunicorn_config.py). A lock on the directory lets one process at a time write them
back, so several workers starting together write each answer once.

Written back, a kept message follows the row its turn had saved last. If the chat went on
meanwhile (that row has a shown child), it becomes another version there, not the shown
one. A file whose chat is gone moves to `recovery/unrestorable/`. Each message carries
`meta.recovered_from`, so a start that stops between the commit and the file's removal does
not write it twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import and_, select

from .extensions import db
from .models import Chat, Message, utcnow

log = logging.getLogger(__name__)

DIRECTORY = "recovery"
LOCK = ".restore.lock"  # held while one process writes the directory's files back
# The fields of a message a turn saves (ChatContextService.save's keywords).
FIELDS = (
    "role",
    "content",
    "reasoning_content",
    "tool_call_id",
    "request_id",
    "content_parts",
    "reasoning_details",
    "tool_calls",
    "citation_sources",
    "meta",
)


def recovery_dir(data_dir: str) -> Path:
    return Path(data_dir) / DIRECTORY


def keep(
    data_dir: str,
    *,
    chat_id: str,
    user_id: int,
    turn_id: str,
    parent_id: int | None,
    messages: list[dict[str, Any]],
) -> Path:
    """Write a turn's unsaved messages to its recovery file (replacing an earlier version
    of the same turn's file); returns the path. Raises OSError when the disk refuses too."""
    directory = recovery_dir(data_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{turn_id}.json"
    record = {
        "version": 1,
        "chat_id": chat_id,
        "user_id": user_id,
        "turn_id": turn_id,
        "parent_id": parent_id,
        "messages": [{k: m[k] for k in FIELDS if k in m} for m in messages],
    }
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".keep-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(record, out, ensure_ascii=False)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def restore(app) -> int:
    """Save every kept answer to its chat and remove its file; returns how many messages
    were written. A file that cannot be read or whose chat is gone is moved aside, never
    lost; a database failure leaves the files for the next start."""
    directory = recovery_dir(app.config["NUMI_DATA_DIR"])
    if not directory.is_dir():
        return 0
    try:
        handle = os.open(directory / LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:  # a read-only data directory: nothing could be removed either
        log.error("kept answers in %s cannot be written back yet: %s", directory, exc)
        return 0
    with _restoring(handle):
        return _restore_all(app, directory)


@contextmanager
def _restoring(handle: int) -> Iterator[None]:
    """Hold the directory's restore lock, waiting while another process holds it (after
    it, the files it wrote back are gone)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def _restore_all(app, directory: Path) -> int:
    written = 0
    with app.app_context():
        for path in sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                written += _restore_one(record, path.stem)
            except (ValueError, KeyError, TypeError, LookupError) as exc:
                db.session.rollback()
                _set_aside(path, f"unreadable ({exc})")
                continue
            except _ChatGone:
                db.session.rollback()
                _set_aside(path, "its chat was deleted")
                continue
            except Exception:
                db.session.rollback()
                log.exception("kept answers in %s could not be saved yet; kept for later", path)
                continue
            finally:
                db.session.remove()
            path.unlink(missing_ok=True)
    if written:
        log.warning("saved %d message(s) kept in %s while the database was unavailable",
                    written, directory)  # fmt: skip
    return written


class _ChatGone(Exception):
    pass


def _restore_one(record: dict[str, Any], name: str) -> int:
    chat = db.session.execute(
        select(Chat).where(
            Chat.id == record["chat_id"],
            Chat.user_id == record["user_id"],
            Chat.deleted_at.is_(None),
        )
    ).scalar_one_or_none()
    if chat is None:
        raise _ChatGone()
    parent_id = record.get("parent_id") or 0
    written = 0
    for index, fields in enumerate(record["messages"]):
        tag = f"{name}:{index}"
        existing = db.session.execute(
            select(Message.id).where(
                Message.chat_id == chat.id, Message.meta_json.contains(f'"recovered_from":"{tag}"')
            )
        ).scalar()
        if existing is not None:  # written by a start that stopped before removing the file
            parent_id = existing
            continue
        parent = db.session.get(Message, parent_id) if parent_id else None
        shown_sibling = db.session.execute(
            select(Message.id).where(
                and_(
                    Message.chat_id == chat.id,
                    Message.parent_id == parent_id,
                    Message.selected.is_(True),
                    Message.deleted_at.is_(None),
                )
            )
        ).first()
        selected = shown_sibling is None
        message = Message(
            chat_id=chat.id,
            parent_id=parent_id,
            selected=selected,
            active=selected and (parent is None or bool(parent.active)),
            **{k: fields.get(k) for k in ("role", "content", "reasoning_content", "tool_call_id")},
        )
        for key in ("content_parts", "reasoning_details", "tool_calls", "citation_sources"):
            if fields.get(key) is not None:
                setattr(message, key, fields[key])
        message.meta = {**(fields.get("meta") or {}), "recovered_from": tag}
        db.session.add(message)
        db.session.flush()
        parent_id = message.id
        written += 1
    chat.updated_at = utcnow()
    db.session.commit()
    return written


def _set_aside(path: Path, why: str) -> None:
    aside = path.parent / "unrestorable"
    aside.mkdir(mode=0o700, exist_ok=True)
    os.replace(path, aside / path.name)
    log.error("kept answers in %s were not saved: %s; moved to %s", path.name, why, aside)
