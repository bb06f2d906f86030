"""Storing an import's chats batch by batch, hidden until the whole import is in.

The records come from `numi.chat.import_stream` (read and checked in the import's
subprocess). Each chat is written soft-deleted with a mark of its job in `deleted_at`
(`pending_mark`), so no list, search, page or turn sees it: every query of chats already
leaves deleted ones out. Each batch of messages is one short transaction, and the caller
yields to the hub between batches. The job's last transaction reveals all its chats at
once (`reveal`); a failed or interrupted job deletes them (`discard`): all or nothing.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import gevent
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.orm import selectinload

from .. import endpoints as endpoint_store
from ..errors import NumiError
from ..extensions import db
from ..models import Attachment, Chat, Endpoint, ImportJob, Message, usage_columns, utcnow
from ..models.chats import cached_column
from ..models.columns import dumps
from . import live_mirror
from .export import ATTACHMENT_INFO_KEY

# Chats of a running import have deleted_at = this epoch plus the job's id in seconds: a
# time no delete ever writes (the bulk "undo" only restores the last minute's deletes), and
# the mark tells whose job a hidden chat belongs to.
_PENDING_EPOCH = datetime(2000, 1, 1)
# Rows deleted per statement when a failed import is discarded (others run between them).
_DISCARD_CHUNK = 500


def pending_mark(job_id: int) -> datetime:
    """The `deleted_at` of the chats job `job_id` has written and not revealed yet."""
    return _PENDING_EPOCH + timedelta(seconds=job_id)


class ChatWriter:
    """Writes the chats of one import job for its user, one record at a time."""

    def __init__(self, job: ImportJob):
        self.job = job
        self.chat_ids: list[str] = []
        self._chat_id: str | None = None
        self._ids: list[int] = []  # the stored id of each message of the current chat
        self.skipped = 0  # chats of the file this user already has
        self._skipping = False

    def begin_chat(self, header: dict[str, Any]) -> None:
        """Add a hidden chat with the header's title, route and settings (committed); or,
        when the user already has this chat from an earlier import of its app's file (or
        from earlier in this file), skip it and its messages."""
        self._skipping = imported_before(self.job, header)
        if self._skipping:
            self.skipped += 1
            self._chat_id = None
            return
        endpoint, model = _route(self.job.user_id, header)
        now = utcnow()
        chat = Chat(
            user_id=self.job.user_id,
            title=header["title"],
            endpoint_id=endpoint.id if endpoint else None,
            model=model,
            created_at=_time(header["created_at"]) or now,
            updated_at=_time(header["updated_at"]) or now,
            deleted_at=pending_mark(self.job.id),
            import_source=header.get("source"),
            import_id=header.get("source_id"),
        )
        chat.settings = header["settings"]
        db.session.add(chat)
        self.job.updated_at = now
        db.session.commit()
        self._chat_id, self._ids = chat.id, []
        self.chat_ids.append(chat.id)

    def write(self, messages: list[dict[str, Any]]) -> None:
        """Add one batch of the current chat's messages (committed with the job's progress).

        The batch is one executemany INSERT, in order (ids follow the transcript), each row
        with a placeholder parent (minus its position in the chat, never a real id); one
        SELECT then reads the new ids back by placeholder and one executemany UPDATE sets
        the real parents. The chat is hidden meanwhile. Row by row through the ORM, a
        30,000-message import took several times as long."""
        if self._skipping:
            self._progress(len(messages))
            return
        if self._chat_id is None:
            raise NumiError("import_failed", "The import file was read out of order.", 500)
        chat_id, now = self._chat_id, utcnow()
        owned = _owned_attachments(self.job.user_id, messages)
        first = len(self._ids)
        rows = [_row(chat_id, fields, owned, now) for fields in messages]
        for position, row in enumerate(rows, start=first):
            row["parent_id"] = -1 - position
        table = Message.__table__
        db.session.execute(insert(table), rows)
        placed = db.session.execute(
            select(table.c.id, table.c.parent_id)
            .where(table.c.chat_id == chat_id, table.c.parent_id < 0)
            .order_by(table.c.id)
        ).all()
        self._ids += [row_id for row_id, _ in placed]
        if [-1 - placeholder for _, placeholder in placed] != list(range(first, len(self._ids))):
            raise NumiError("import_failed", "The import's rows were stored out of order.", 500)
        db.session.execute(
            update(table)
            .where(table.c.id == bindparam("row"))
            .values(parent_id=bindparam("parent")),
            [
                {
                    "row": self._ids[position],
                    "parent": 0 if fields["parent"] is None else self._ids[fields["parent"]],
                }
                for position, fields in enumerate(messages, start=first)
            ],
        )
        self._progress(len(messages))

    def _progress(self, count: int) -> None:
        job = db.session.get(ImportJob, self.job.id)
        job.done += count
        job.updated_at = utcnow()
        db.session.commit()
        self.job = job

    def reveal(self, project_id: int | None = None) -> list[Chat]:
        """Show every chat of the job (in the caller's transaction), moved into `project_id`
        when given; returns them in file order."""
        values: dict[str, Any] = {"deleted_at": None}
        if project_id is not None:
            values["project_id"] = project_id
        db.session.execute(
            update(Chat)
            .where(Chat.user_id == self.job.user_id, Chat.deleted_at == pending_mark(self.job.id))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        # A bulk UPDATE: the mirror's session hook does not see these chats appear.
        live_mirror.note_changes(self.job.user_id, self.chat_ids)
        db.session.expire_all()
        rows = {
            chat.id: chat
            for start in range(0, len(self.chat_ids), 500)
            for chat in db.session.execute(
                select(Chat)
                .options(selectinload(Chat.tag_rows))  # to_dict reads them: no query per chat
                .where(
                    Chat.user_id == self.job.user_id,
                    Chat.id.in_(self.chat_ids[start : start + 500]),
                )
            ).scalars()
        }
        return [rows[chat_id] for chat_id in self.chat_ids if chat_id in rows]


def imported_before(job: ImportJob, header: dict[str, Any]) -> bool:
    """Whether the job's user already has the chat of `header` from an earlier import of its
    app's file (a live chat), or from earlier in this job's file."""
    source, source_id = header.get("source"), header.get("source_id")
    if not source or not source_id:
        return False
    found = db.session.execute(
        select(Chat.id)
        .where(
            Chat.user_id == job.user_id,
            Chat.import_source == source,
            Chat.import_id == source_id,
            Chat.deleted_at.is_(None) | (Chat.deleted_at == pending_mark(job.id)),
        )
        .limit(1)
    ).first()
    return found is not None


def discard(job: ImportJob) -> None:
    """Delete whatever `job` wrote and did not reveal, a chunk per transaction with the hub
    free between chunks (a failed import leaves nothing behind)."""
    hidden = select(Chat.id).where(
        Chat.user_id == job.user_id, Chat.deleted_at == pending_mark(job.id)
    )
    for chat_id in list(db.session.execute(hidden).scalars()):
        while True:
            ids = list(
                db.session.execute(
                    select(Message.id).where(Message.chat_id == chat_id).limit(_DISCARD_CHUNK)
                ).scalars()
            )
            if not ids:
                break
            started = time.perf_counter()
            db.session.execute(delete(Message).where(Message.id.in_(ids)))
            db.session.commit()
            gevent.sleep(2 * (time.perf_counter() - started))  # as the writer: others first
        db.session.execute(delete(Chat).where(Chat.id == chat_id, Chat.user_id == job.user_id))
        db.session.commit()


def _row(
    chat_id: str, fields: dict[str, Any], owned: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """The `messages` row of one imported message, parent aside; the JSON columns and the
    usage columns as the model's setters would write them."""
    model, input_tokens, output_tokens = usage_columns(fields["meta"])
    return {
        "chat_id": chat_id,
        "selected": fields["selected"],
        "active": fields["active"],
        "in_context": True,
        "role": fields["role"],
        "content": fields["content"],
        "content_parts_json": dumps([_attachment_part(p, owned) for p in fields["content_parts"]]),
        "reasoning_content": fields["reasoning_content"],
        "reasoning_details_json": dumps(fields["reasoning_details"]),
        "tool_calls_json": dumps(fields["tool_calls"]),
        "tool_call_id": fields["tool_call_id"],
        "citation_sources_json": dumps(fields["citation_sources"]),
        "meta_json": dumps(fields["meta"]),
        "model": model,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_tokens": cached_column(fields["meta"]),
        "request_id": fields["request_id"],
        "created_at": _time(fields["created_at"]) or now,
    }


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _route(user_id: int, header: dict[str, Any]) -> tuple[Endpoint | None, str | None]:
    """The file's endpoint when this user can see it (same id and name, or same name);
    otherwise the user's default route, keeping the model if that endpoint offers it."""
    hint, model = header["endpoint"] or {}, header["model"]
    if hint.get("id") is not None:
        try:
            endpoint = endpoint_store.get_endpoint(user_id, hint["id"])
            if endpoint.name == hint.get("name"):
                return endpoint, model
        except NumiError:
            pass
    if hint.get("name"):
        endpoint = endpoint_store.find_by_name(user_id, hint["name"])
        if endpoint is not None:
            return endpoint, model
    default = endpoint_store.default_route(user_id)
    if default is None:
        return None, model
    if model and (model in default.model_ids or model == default.default_model):
        return default, model
    return default, default.default_model or model


def _owned_attachments(user_id: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    parts = [p for m in messages for p in m["content_parts"] if p["type"] == "attachment"]
    if not parts:
        return {"by_id": {}, "by_sha": {}}
    ids = {p["id"] for p in parts}
    shas = {
        p[ATTACHMENT_INFO_KEY].get("sha256")
        for p in parts
        if isinstance(p.get(ATTACHMENT_INFO_KEY), dict)
    }
    rows = db.session.execute(
        select(Attachment).where(
            Attachment.user_id == user_id,
            Attachment.id.in_(ids) | Attachment.sha256.in_({s for s in shas if isinstance(s, str)}),
        )
    ).scalars()
    found: dict[str, dict] = {"by_id": {}, "by_sha": {}}
    for row in rows:
        found["by_id"][row.id] = row
        found["by_sha"].setdefault(row.sha256, row)
    return found


def _attachment_part(part: dict[str, Any], owned: dict[str, Any]) -> dict[str, Any]:
    """An attachment reference the importing user owns; anything else becomes a text note,
    never a reference to another user's file."""
    if part["type"] != "attachment":
        return part
    info = part.get(ATTACHMENT_INFO_KEY) if isinstance(part.get(ATTACHMENT_INFO_KEY), dict) else {}
    clean = {k: v for k, v in part.items() if k != ATTACHMENT_INFO_KEY}
    row = owned["by_id"].get(part["id"])
    if row is not None and (not info.get("sha256") or info["sha256"] == row.sha256):
        return clean
    row = owned["by_sha"].get(info.get("sha256"))
    if row is not None:
        return {**clean, "id": row.id}
    name = info.get("filename") if isinstance(info.get("filename"), str) else f"#{part['id']}"
    return {"type": "text", "text": f"[attachment not available: {name}]"}
