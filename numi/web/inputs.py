"""Reading request input: JSON bodies, form fields, query values and WebSocket messages,
with one clear error (a stable code, a 400) for anything malformed or out of bounds.

Every JSON document that arrives from outside (a request body, an import file, a
WebSocket message) is decoded by `decode_json`, which refuses nesting deeper than
NUMI_MAX_JSON_DEPTH before the parser sees it: Python's parser recurses once per level,
so a 100,000-deep array would otherwise end in a RecursionError (a 500, a dropped socket).
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

import gevent
from flask import current_app, request

from ..errors import NumiError, invalid

# After the escapes are gone (see json_depth_exceeds), a string literal is a quote, no
# quote, and a quote or the end of the text (an unterminated string): every match attempt
# succeeds at once, so the scan is linear. The pattern this replaces demanded the closing
# quote of an escape-laden string and was retried at every quote of an unterminated one
# (quadratic: a 40 KB body once held the server for 13 s).
_STRING = re.compile(r'"[^"]*(?:"|\Z)')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 and -1 as signed bytes
# Text scanned per slice (tens of milliseconds at most); the hub serves other requests between slices.
_DEPTH_SLICE = 1 << 20
# Longest value accepted in one query argument; ids, cursors, tokens and search words are
# far shorter, and nothing reads a longer one.
MAX_QUERY_VALUE_CHARS = 4096
# Event ids are milliseconds since 1970 plus a count: 13 digits today; 18 keeps them in 2**62.
_EVENT_ID = re.compile(r"[0-9]{1,18}")


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether `text` nests arrays/objects deeper than `limit`, found without parsing, in
    time linear in the length of `text` (C-speed passes over slices of a megabyte, with the
    hub free to serve other requests between them). Exact for valid JSON and for any
    prefix the parser would read before failing: invalid JSON stops the parser at its
    first error, before it could nest any deeper."""
    if text.count("[") + text.count("{") <= limit:
        return False
    # Escape pairs go first, left to right as the parser reads them (`\\` before `\"`), so
    # that no quote left over is an escaped one. A backslash outside a string is invalid
    # JSON, where the parser stops.
    plain = text.replace("\\\\", "").replace('\\"', "")
    depth, in_string = 0, False
    for start in range(0, len(plain), _DEPTH_SLICE):
        if start:
            _let_the_hub_run()
        part = plain[start : start + _DEPTH_SLICE]
        if in_string:  # a string left open by the slice before: reopen it here
            part = '"' + part
        # Every quote left opens or closes a string: an odd count leaves one open.
        in_string = part.count('"') % 2 == 1
        brackets = (
            _NOT_BRACKET.sub("", _STRING.sub("", part)).encode("ascii").translate(_BRACKET_STEPS)
        )
        sums = list(accumulate(array("b", brackets), initial=depth))
        if max(sums) > limit:
            return True
        depth = sums[-1]
    return False


def _let_the_hub_run() -> None:
    gevent.sleep(0)


def decode_json(
    raw: bytes | str,
    *,
    max_depth: int,
    subject: str = "The request body",
    code: str = "invalid_json",
) -> Any:
    """The decoded JSON of `raw`, or a NumiError(code) saying what is wrong with it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise invalid(f"{subject} is not UTF-8 text.", code) from None
    if not raw.strip():
        raise invalid(f"{subject} is empty.", code)
    if json_depth_exceeds(raw, max_depth):
        raise invalid(f"{subject} nests deeper than {max_depth} levels.", "too_deep")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise invalid(
            f"{subject} is not valid JSON (line {exc.lineno}, column {exc.colno}).", code
        ) from None
    except (ValueError, RecursionError):
        # e.g. an integer of more digits than Python converts
        raise invalid(f"{subject} is not valid JSON.", code) from None


def request_data() -> dict[str, Any]:
    """The request's fields from a JSON object body or a form. Malformed JSON is a 400."""
    if request.mimetype == "application/json":
        raw = request.get_data(cache=True)
        if not raw:
            return {}
        data = decode_json(raw, max_depth=current_app.config["NUMI_MAX_JSON_DEPTH"])
        if not isinstance(data, dict):
            raise invalid("The request body must be a JSON object.", "invalid_json")
        return data
    return {key: request.form.get(key) for key in request.form}


def check_query_values() -> None:
    """Refuse a request whose query string carries an over-long value (before_request)."""
    for name, value in request.args.items(multi=True):
        if len(value) > MAX_QUERY_VALUE_CHARS:
            raise NumiError("too_long", f"The query value {name[:40]!r} is too long.", 400)


def event_id_value(value: Any, name: str = "last_event_id") -> int | None:
    """An event or message id sent by a client (a number or decimal text), or a 400."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value) if value >= 0 else "-"
    if not isinstance(value, str) or not _EVENT_ID.fullmatch(value):
        raise invalid(f"{name} must be a whole number of at most 18 digits.", "invalid_event_id")
    return int(value)


def int_arg(
    name: str, default: int | None = None, *, low: int = 0, high: int = 2**62
) -> int | None:
    """An integer query argument within bounds, or a 400 naming it."""
    value = request.args.get(name)
    if value in (None, ""):
        return default
    if not re.fullmatch(r"-?[0-9]{1,19}", value):
        raise invalid(f"{name} must be a whole number.")
    number = int(value)
    if not low <= number <= high:
        raise invalid(f"{name} must be between {low} and {high}.")
    return number
