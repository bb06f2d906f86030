"""Server-sent events read as plain dicts from an SDK streaming response.

The SDKs' own stream iterators build a typed pydantic object for every chunk, which cost
about half the server's CPU on fast streams while the adapters read a few fields. So the
adapters keep the SDK for sending the request (client, auth headers, base URL, connection
pool, timeouts, and mapping an HTTP error status to APIStatusError & co.) but open it with
the public ``with_streaming_response`` wrapper, which hands back the undecoded response,
and decode the body here: SSE framing, then the JSON of each ``data:`` payload.

Framing (PROTOCOLS §6.3, the WHATWG event-stream rules the SDKs follow): lines end in LF,
CRLF or CR; a blank line ends an event; lines starting with ``:`` are comments
(keep-alives); one space after the field's colon is dropped; several ``data:`` lines of one
event join with newlines; ``id:``, ``retry:`` and unknown fields are ignored; an event
without data is skipped; an unfinished event at the end of the body is dropped. A
``data: [DONE]`` event (Chat Completions) ends the iteration.

Network failures surface as the HTTP client's exceptions (httpx2 ``ReadError``,
``ReadTimeout``, ``RemoteProtocolError``…); ``errors.from_sdk_exception`` maps them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from jiter import from_json

from .errors import interrupted
from .transport import body_chunks, finish_body

_LINE_ENDS = (b"\n", b"\r")


class SSEStream:
    """One open streaming response. Iterate for ``(event name or None, parsed data)``
    pairs; ``response`` is the httpx2 response (ProviderStream shuts its socket down to
    cancel); ``close()`` releases the connection."""

    def __init__(self, api_response: Any) -> None:
        self._api_response = api_response
        self.response = api_response.http_response

    @classmethod
    def open(cls, streaming_call: Any) -> SSEStream:
        """Send the request by entering an SDK ``with_streaming_response`` context.
        Entering raises the SDK's status error (APIStatusError, RateLimitError…) on a
        non-2xx answer, with the body read; the context's exit only closes the response,
        which ``close()`` does."""
        return cls(streaming_call.__enter__())

    def __iter__(self) -> Iterator[tuple[str | None, Any]]:
        chunks = body_chunks(self.response)
        if chunks is None:
            return iter_json_events(self._api_response.iter_bytes())
        self._body = iter(chunks)
        return self._until_done(self._body)

    def _until_done(self, body: Iterator[bytes]) -> Iterator[tuple[str | None, Any]]:
        yield from iter_json_events(body)
        self._ended = True  # `data: [DONE]` or the body's end; not a close, not a failure

    def close(self) -> None:
        # After `[DONE]` only the body's last chunk is left, sent with it or just after:
        # read, it lets the connection go back to the pool for the next request, which then
        # makes no new TCP (and TLS) connection. Closed unread, the connection is closed.
        if self._ended and self._body is not None:
            finish_body(self._body, self.response)
        self._api_response.close()

    _body: Iterator[bytes] | None = None
    _ended = False


def iter_json_events(chunks: Iterable[bytes]) -> Iterator[tuple[str | None, Any]]:
    """(event, data) per event, data parsed as JSON; stops at ``data: [DONE]``."""
    for event, data in iter_events(chunks):
        if data.startswith(b"[DONE]"):
            return
        try:
            yield event, parse_json(data)
        except ValueError:
            raise interrupted("the provider sent an event that is not JSON") from None


def parse_json(data: bytes) -> Any:
    """`json.loads` of UTF-8 bytes, the same value or the same error.

    jiter (in Rust, a dependency of both SDKs) parses a stream's small event in about a
    third of json.loads's time (the decode to text, three Python frames and two regex
    matches around the C scanner): most of a token's JSON cost on the read path. What it
    refuses and json.loads takes (a lone surrogate escape) or both refuse goes to
    json.loads, so values and errors are json.loads's.
    """
    try:
        return from_json(data)
    except ValueError:
        # Text, not bytes: json.loads of bytes first guesses their encoding.
        return json.loads(data.decode("utf-8"))


def iter_events(chunks: Iterable[bytes]) -> Iterator[tuple[str | None, bytes]]:
    """(event name or None, raw data bytes) per complete event that carries data."""
    event: str | None = None
    data: list[bytes] = []
    for lines in iter_line_batches(chunks):
        for line in lines:
            if not line:
                if data:
                    yield event, data[0] if len(data) == 1 else b"\n".join(data)
                event, data = None, []
                continue
            if line[0] == 58:  # b":" a comment
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                event = value.decode("utf-8", "replace") or None


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Split a byte stream into lines (LF, CRLF or CR), without their ends."""
    for lines in iter_line_batches(chunks):
        yield from lines


def iter_line_batches(chunks: Iterable[bytes]) -> Iterator[list[bytes]]:
    """The complete lines (LF, CRLF or CR, without their ends) of each chunk of a byte
    stream, as one list per chunk: a read of many events is split in one call. A line
    spread over many chunks is joined once, not re-copied per chunk."""
    pending: list[bytes] = []  # pieces of a line not ended yet
    skip_lf = False  # the last chunk ended in CR: a LF opening the next one belongs to it
    for chunk in chunks:
        if skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if not chunk:
            continue
        skip_lf = False
        has_cr = b"\r" in chunk
        if not has_cr and b"\n" not in chunk:
            pending.append(chunk)
            continue
        if pending:
            pending.append(chunk)
            chunk = b"".join(pending)
            pending = []
        if not has_cr:
            # LF only (what servers send): the last piece is the unfinished line.
            lines = chunk.split(b"\n")
            rest = lines.pop()
            if rest:
                pending.append(rest)
            yield lines
            continue
        lines = chunk.splitlines(True)  # bytes.splitlines splits on LF, CRLF, CR only
        if not lines[-1].endswith(_LINE_ENDS):
            pending.append(lines.pop())
        skip_lf = chunk.endswith(b"\r")
        yield [line[:-2] if line.endswith(b"\r\n") else line[:-1] for line in lines]
