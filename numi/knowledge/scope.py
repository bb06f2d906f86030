"""A search's scope as one bound value, whatever its size.

A chat's or project's documents are named to the database as one parameter (a JSON array
read with `json_each` on SQLite, an array with `= ANY` on PostgreSQL), so a scope of any
number of documents is searched whole: naming each id as its own parameter once capped a
scope at its first 500 documents.
"""

from __future__ import annotations

import json
from typing import Any

from ..extensions import db


def in_scope(expression: str, params: dict[str, Any], ids: list[int], name: str = "scope") -> str:
    """A SQL condition that `expression` is one of `ids`, its value put in `params[name]`."""
    values = [int(i) for i in ids]
    if db.engine.dialect.name == "postgresql":
        params[name] = values
        return f"{expression} = ANY(:{name})"
    params[name] = json.dumps(values)
    return f"{expression} IN (SELECT value FROM json_each(:{name}))"
