"""Placeholders put back: in a stream, chunk by chunk, and in a tool call's JSON.

A stream's chunks split text anywhere, a placeholder too (`[EMA` then `IL_1]`). `Restorer`
holds back the tail of a chunk that could still become a placeholder, at most one
placeholder's length, and lets everything before it through at once; the next chunk
completes or dismisses it. A chunk without `[` (nearly every token) passes untouched.
A placeholder the chat never made (a model's own `[NOTE_1]`) is left as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .placeholders import MAX_PLACEHOLDER_CHARS, PLACEHOLDER

# The start of a placeholder, up to but without its closing bracket.
_OPEN = re.compile(r"\[(?:[A-Z][A-Z0-9]{0,19}(?:_(?:[1-9][0-9]{0,5})?)?)?")


class Restorer:
    """One stream of text (the answer, or its reasoning) with its placeholders restored."""

    def __init__(self, values: dict[str, str]):
        self.values = values
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The text of `chunk` that can be shown now, restored."""
        if not self._held and "[" not in chunk:
            return chunk
        text = self._held + chunk
        self._held = ""
        cut = text.rfind("[")
        if cut != -1 and len(text) - cut < MAX_PLACEHOLDER_CHARS and _OPEN.fullmatch(text, cut):
            text, self._held = text[:cut], text[cut:]
        return PLACEHOLDER.sub(self._put_back, text) if "[" in text else text

    def flush(self) -> str:
        """What is still held at the stream's end (never a whole placeholder)."""
        held, self._held = self._held, ""
        return held

    def restore(self, text: str) -> str:
        """A whole text restored at once."""
        return PLACEHOLDER.sub(self._put_back, text) if "[" in text else text

    def _put_back(self, match: re.Match[str]) -> str:
        return self.values.get(match.group(0), match.group(0))


def restore_json(text: str, values: dict[str, str]) -> str:
    """A JSON text (a tool call's arguments) with its placeholders restored, each value
    escaped for the JSON string it lands in."""
    if "[" not in text:
        return text

    def put_back(match: re.Match[str]) -> str:
        value = values.get(match.group(0))
        return match.group(0) if value is None else json.dumps(value, ensure_ascii=False)[1:-1]

    return PLACEHOLDER.sub(put_back, text)


def restore_value(value: Any, restorer: Restorer) -> Any:
    """A parsed JSON value with the placeholders in its strings restored."""
    if isinstance(value, str):
        return restorer.restore(value)
    if isinstance(value, list):
        return [restore_value(item, restorer) for item in value]
    if isinstance(value, dict):
        return {key: restore_value(item, restorer) for key, item in value.items()}
    return value
