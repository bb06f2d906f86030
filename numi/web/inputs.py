"""Reading request bodies: JSON or form, with one clear error for malformed input."""

from __future__ import annotations

import json
from typing import Any

from flask import request

from ..errors import invalid


def request_data() -> dict[str, Any]:
    """The request's fields from a JSON object body or a form. Malformed JSON is a 400."""
    if request.mimetype == "application/json":
        raw = request.get_data(cache=True)
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise invalid("The request body is not valid JSON.", "invalid_json") from None
        if not isinstance(data, dict):
            raise invalid("The request body must be a JSON object.", "invalid_json")
        return data
    return {key: request.form.get(key) for key in request.form}


def int_arg(name: str, default: int | None = None, *, low: int = 0, high: int = 2**62) -> int | None:
    """An integer query argument within bounds, or a 400 naming it."""
    value = request.args.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise invalid(f"{name} must be a whole number.") from None
    if not low <= number <= high:
        raise invalid(f"{name} must be between {low} and {high}.")
    return number
