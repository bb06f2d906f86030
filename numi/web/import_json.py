"""A JSON array read one element at a time, so a 200 MB export never sits in memory whole.

`JsonItems` reads a byte stream in chunks and hands out its top-level array's elements,
each decoded by the standard library's C decoder (`raw_decode`) as soon as its text has
arrived: the memory it holds is one element's text and the element itself, not the file
(issue 42: a ChatGPT or Claude.ai export of years of chats is one array of conversations).
An element longer than the chunk read so far is retried on a window twice as large, so
each byte is decoded a bounded number of times. Used in the import's subprocess only
(numi/web/import_worker.py).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import NumiError
from .inputs import json_depth_exceeds

CHUNK_CHARS = 1 << 20
_SPACE = " \t\r\n"
_decoder = json.JSONDecoder()


class JsonItems:
    """The JSON text read by `read(n) -> bytes`; `first()` peeks at its first character,
    `items()` yields the elements of the array it holds. Errors are NumiError(`code`)."""

    def __init__(
        self, read: Callable[[int], bytes], *, max_depth: int, code: str = "invalid_import"
    ):
        self._read = read
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        self._text = ""
        self._at = 0
        self._eof = False
        self._max_depth = max_depth
        self._code = code

    def first(self) -> str:
        """The first character that is not white space ("" for an empty text)."""
        self._skip_space()
        return self._text[self._at] if self._at < len(self._text) else ""

    def items(self) -> Iterator[Any]:
        """Each element of the top-level array, in order; the whole text must be that array."""
        if self.first() != "[":
            raise self._invalid("is not a JSON array")
        self._at += 1
        index = 0
        while True:
            self._skip_space()
            if self._peek() == "]" and index == 0:
                self._at += 1
                break
            yield self._element(index)
            index += 1
            self._skip_space()
            mark = self._peek()
            self._at += 1
            if mark == "]":
                break
            if mark != ",":
                raise self._invalid(f"is not valid JSON after element {index - 1}")
        self._skip_space()
        if self._at < len(self._text):
            raise self._invalid("has text after its closing bracket")

    def _element(self, index: int) -> Any:
        want = CHUNK_CHARS
        while True:
            try:
                value, end = _decoder.raw_decode(self._text, self._at)
            except json.JSONDecodeError:
                value, end = None, -1
            except (ValueError, RecursionError):
                raise self._invalid(f"is not valid JSON (element {index})") from None
            # A number or a word could go on past the text read so far: read on to be sure.
            if end >= 0 and (end < len(self._text) or self._eof):
                break
            if self._eof:
                raise self._invalid(f"is not valid JSON or is cut short (element {index})")
            self._fill(want)
            want *= 2  # a long element: each retry reads as much again as it has
        if json_depth_exceeds(self._text[self._at : end], self._max_depth - 1):
            raise NumiError(
                "too_deep", f"The file nests deeper than {self._max_depth} levels.", 400
            )
        self._at = end
        return value

    def _peek(self) -> str:
        if self._at >= len(self._text):
            self._fill(CHUNK_CHARS)
        if self._at >= len(self._text):
            raise self._invalid("is cut short")
        return self._text[self._at]

    def _skip_space(self) -> None:
        while True:
            while self._at < len(self._text) and self._text[self._at] in _SPACE:
                self._at += 1
            if self._at < len(self._text) or self._eof:
                return
            self._fill(CHUNK_CHARS)

    def _fill(self, chars: int) -> None:
        """Read at least `chars` more characters (fewer at the end of the stream), dropping
        the text already handed out."""
        self._text = self._text[self._at :]
        self._at = 0
        goal = len(self._text) + chars
        while len(self._text) < goal and not self._eof:
            data = self._read(max(chars, CHUNK_CHARS))
            try:
                self._text += self._utf8.decode(data, final=not data)
            except UnicodeDecodeError:
                raise self._invalid("is not UTF-8 text") from None
            self._eof = not data

    def _invalid(self, what: str) -> NumiError:
        return NumiError(self._code, f"The file {what}.", 400)
