"""What every table shares: times (naive UTC), chat ids, and JSON text columns."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any


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
