"""What every table shares: times (naive UTC), chat ids, JSON text columns, and the one
lookup of a user's own row by id."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import select

from ..errors import NotFound
from ..extensions import db

Row = TypeVar("Row")


def utcnow() -> datetime:
    # Naive UTC: SQLite has no time zones, and naive values compare the same on both backends.
    return datetime.now(UTC).replace(tzinfo=None)


def new_chat_id() -> str:
    return str(uuid.uuid4())


def loads(text: str | None, empty: Any) -> Any:
    if not text:
        return empty
    return json.loads(text)


def dumps(value: Any) -> str | None:
    if value is None or value == [] or value == {}:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_property(column: str, empty_factory: type):
    """A read/write property that (de)serialises the JSON text column `column`."""

    def getter(self):
        return loads(getattr(self, column), empty_factory())

    def setter(self, value):
        setattr(self, column, dumps(value))

    return property(getter, setter)


def iso(value: datetime | None) -> str | None:
    """A stored time as ISO 8601 UTC (`…Z`), or None."""
    return value.isoformat() + "Z" if value else None


# Table options of a table whose ids are in URLs (/p/3, /settings/endpoints/7): SQLite's
# AUTOINCREMENT never hands a deleted row's id to a new row, so an old link or a cached
# page never opens another object. (PostgreSQL's sequences never reuse ids anyway.)
IDS_NEVER_REUSED = {"sqlite_autoincrement": True}


def get_owned(model: type[Row], row_id: Any, user_id: int, what: str) -> Row:
    """The row `row_id` of `model` that belongs to `user_id`, or NotFound(`what`): a missing
    id, another user's and one that is no id at all (text, a boolean) are the same 404."""
    if not isinstance(row_id, int) or isinstance(row_id, bool):
        raise NotFound(what)
    table: Any = model
    row = db.session.execute(
        select(table).where(table.id == row_id, table.user_id == user_id)
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(what)
    return row
