"""The statements ChatContextService runs on every turn, and message rows as values.

Built once at import on Table columns with `bindparam`: no statement building, cache key
or ORM entity loading per call (an ORM entity `select` costs several times the same Core
statement; bench/PROFILE.md). Bound names are not column names of the table a statement
writes: those are its SET/VALUES parameters.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, insert, select, true, update

from ..models import Chat, Checkpoint, Message, utcnow
from ..models.chats import cached_column, usage_columns
from ..models.columns import dumps, loads

_chats = Chat.__table__.c
_messages = Message.__table__.c
_checkpoints = Checkpoint.__table__.c

LIVE_CHAT = select(
    _chats.id,
    _chats.user_id,
    _chats.title,
    _chats.endpoint_id,
    _chats.model,
    _chats.settings_json,
    _chats.project_id,
    _chats.temporary,
).where(
    _chats.id == bindparam("chat_id"),
    _chats.user_id == bindparam("user_id"),
    _chats.deleted_at.is_(None),
)
_SHOWN = (_messages.active.is_(True), _messages.deleted_at.is_(None))
# The newest valid checkpoint (see `latest_checkpoint`).
CHECKPOINT = (
    select(_checkpoints.id, _checkpoints.summary, _checkpoints.through_message_id)
    .where(
        _checkpoints.chat_id == bindparam("chat_id"),
        select(_messages.id)
        .where(
            _messages.chat_id == bindparam("chat_id"),
            *_SHOWN,
            _messages.id == _checkpoints.through_message_id,
        )
        .exists(),
    )
    .order_by(_checkpoints.id.desc())
    .limit(1)
)
# What `internal` reads of a message.
_HISTORY_COLUMNS = (
    _messages.id,
    _messages.role,
    _messages.content,
    _messages.content_parts_json,
    _messages.reasoning_content,
    _messages.reasoning_details_json,
    _messages.tool_calls_json,
    _messages.tool_call_id,
)
_LIVE = (
    _messages.chat_id == bindparam("chat_id"),
    *_SHOWN,
    _messages.in_context.is_(True),
)
_AFTER_CHECKPOINT = _messages.id > bindparam("after")
_HISTORY = {
    False: select(*_HISTORY_COLUMNS).where(*_LIVE),
    True: select(*_HISTORY_COLUMNS).where(*_LIVE, _AFTER_CHECKPOINT),
}
HISTORY_COUNT = {
    False: select(func.count(_messages.id)).where(*_LIVE),
    True: select(func.count(_messages.id)).where(*_LIVE, _AFTER_CHECKPOINT),
}
_history_pages: dict[tuple[bool, int], Any] = {}  # (after a checkpoint, rows) -> statement
LAST_MESSAGE = (
    select(_messages.id)
    .where(_messages.chat_id == bindparam("chat_id"))
    .order_by(_messages.id.desc())
    .limit(1)
)
# A turn's start: the chat and its newest message id (the turn's history boundary) in one.
LIVE_CHAT_AND_LAST = LIVE_CHAT.add_columns(LAST_MESSAGE.scalar_subquery().label("last_id"))
FIND_REQUEST = select(_messages.id, _messages.active).where(
    _messages.chat_id == bindparam("chat_id"), _messages.request_id == bindparam("request_id")
)
# (Bound names other than the table's column names: those are the SET/VALUES parameters.)
TOUCH_CHAT = (
    update(Chat.__table__)
    .where(
        _chats.id == bindparam("touch_chat"),
        _chats.user_id == bindparam("touch_user"),
        _chats.deleted_at.is_(None),
    )
    .values(updated_at=bindparam("touch_now"))
)
# The parent is the tip of the shown branch, as Message's column default finds it, read in
# the INSERT itself (one statement, the same transaction).
_BRANCH_TIP = (
    select(func.coalesce(func.max(_messages.id), 0))
    .where(_messages.chat_id == bindparam("tip_chat"), _messages.active == true())
    .scalar_subquery()
)
INSERT_MESSAGE = (
    insert(Message.__table__)
    .values(parent_id=_BRANCH_TIP)
    .returning(_messages.id, _messages.parent_id)
)
# A row saved under a parent of its own (a compare lane's versions, agent/lanes.py).
INSERT_MESSAGE_UNDER = insert(Message.__table__).returning(_messages.id, _messages.parent_id)


def history_page_where(where: Any, after_checkpoint: bool, rows: int):
    """The newest `rows` rows of a history read from `where` (a compare lane's own branch:
    rows of several versions, so not only the shown ones) instead of the transcript. Built
    per call: a compare turn is rare and its lanes load once each."""
    stmt = select(*_HISTORY_COLUMNS).where(*_lane_rows(where, after_checkpoint))
    return stmt.order_by(_messages.id.desc()).limit(rows)


def history_count_where(where: Any, after_checkpoint: bool):
    """How many rows `history_page_where` reads from, without its limit."""
    return select(func.count(_messages.id)).where(*_lane_rows(where, after_checkpoint))


def _lane_rows(where: Any, after_checkpoint: bool) -> tuple:
    rows = (
        _messages.chat_id == bindparam("chat_id"),
        _messages.deleted_at.is_(None),
        _messages.in_context.is_(True),
        where,
    )
    return (*rows, _AFTER_CHECKPOINT) if after_checkpoint else rows


def history_page(after_checkpoint: bool, rows: int):
    """The newest `rows` history rows, newest first (statements kept per limit)."""
    key = (after_checkpoint, rows)
    stmt = _history_pages.get(key)
    if stmt is None:
        stmt = _history_pages[key] = (
            _HISTORY[after_checkpoint].order_by(_messages.id.desc()).limit(rows)
        )
    return stmt


_COLUMNS = {"role", "content", "reasoning_content", "tool_call_id", "request_id"}
_JSON_COLUMNS = {
    "content_parts": "content_parts_json",
    "reasoning_details": "reasoning_details_json",
    "tool_calls": "tool_calls_json",
    "citation_sources": "citation_sources_json",
}


def message_values(fields: dict[str, Any]) -> dict[str, Any]:
    """A new message's column values from `save`'s fields, as Message's constructor and
    JSON properties would set them (every column named, for one cached INSERT)."""
    values: dict[str, Any] = {name: fields.get(name) for name in _COLUMNS}
    for name, column in _JSON_COLUMNS.items():
        values[column] = dumps(fields.get(name))
    meta = fields.get("meta")
    values["meta_json"] = dumps(meta)
    values["model"], values["input_tokens"], values["output_tokens"] = usage_columns(meta or {})
    values["cached_tokens"] = cached_column(meta or {})
    # A compare lane saves its rows as versions beside the others: not all selected or
    # shown (agent/lanes.py); every other save is on the shown branch.
    values.update(
        selected=fields.get("selected", True),
        active=fields.get("active", True),
        in_context=True,
        created_at=utcnow(),
    )
    return values


def internal(row: Any) -> dict[str, Any]:
    """`to_internal` of a row read with `_HISTORY_COLUMNS` (or a Message)."""
    message: dict[str, Any] = {"role": row.role, "content": row.content or "", "_db_id": row.id}
    if row.tool_calls_json:
        tool_calls = loads(row.tool_calls_json, [])
        if tool_calls:
            message["tool_calls"] = tool_calls
    if row.tool_call_id:
        message["tool_call_id"] = row.tool_call_id
    if row.reasoning_content:
        message["reasoning_content"] = row.reasoning_content
    if row.reasoning_details_json:
        details = loads(row.reasoning_details_json, [])
        if details:
            message["reasoning_details"] = details
    if row.content_parts_json:
        parts = loads(row.content_parts_json, [])
        if parts:
            message["_content_parts"] = parts
    return message
