"""The SDK clients' HTTP transport, with a faster read path for chunked response bodies.

The SDKs keep building requests, authenticating, mapping errors and retrying on httpx2;
httpcore2 keeps connecting (TLS, proxies, the pool, keep-alive) and reading the status
line and headers with h11. Only the body of a chunked response (every SSE stream) is read
differently: h11 parses one chunk per `next_event` (a regex, an event object, a trip up
through httpcore2's and httpx2's iterators per chunk), so a stream of one-token chunks
paid that per token. Here the connection's socket is read in up to 64 KiB at a time,
every chunk in the read is unframed in one pass, and the read's data goes up the chain as
one piece. At the body's end h11 is handed the last chunk, so its state (and the pool's
keep-alive) is what it would have been; cancelling or failing mid-body closes the
connection, as before. Reads keep the request's read timeout and go through the
connection's own network stream, so they are cooperative under gevent.

The response head has a deadline of its own (`headers_timeout`): a server that accepts
the request and never answers it is cut after that long, not after the body's read
timeout (minutes, for a stream whose tokens may be far apart).

Errors are httpcore2's (`ReadTimeout`, `ReadError`, `RemoteProtocolError`), which httpx2
maps as it maps its own. Whatever this does not recognise (HTTP/2, a traced request, a
body that is not chunked, an h11 that has changed) takes httpcore2's own path.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any, Iterable, Iterator

import h11
import httpx2
from h11._readers import ChunkedReader
from httpcore2 import ConnectError, ConnectTimeout, ReadError, ReadTimeout, RemoteProtocolError
from httpcore2._backends.sync import SyncBackend, SyncStream
from httpcore2._sync.http11 import HTTP11ConnectionByteStream
from httpx2._client import BoundSyncStream
from httpx2._transports.default import ResponseStream

READ_BYTES = 64 * 1024
# The longest chunk-size line (with extensions) or trailer section kept while incomplete.
MAX_LINE = 16 * 1024
_CHUNK_SIZE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,20})[ \t]*(?:;[^\r\n]*)?")
# The same size line with its CRLF: the fast case of a whole chunk in the buffer.
_CHUNK_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,20})[ \t]*(?:;[^\r\n]*)?\r\n")
_INCOMPLETE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)


def sdk_http_client(
    sdk: Any, transport: Any, timeout: Any, headers_timeout: float | None = None
) -> Any:
    """The SDK's default httpx2 client (on `transport` when given, else on the SDK's own
    transport and the environment's proxies), whose chunked response bodies take the fast
    read path, and whose response heads must arrive within `headers_timeout` seconds
    (None: the read timeout)."""
    if transport is not None:
        client = sdk.DefaultHttpxClient(transport=transport, timeout=timeout)
    else:
        client = sdk.DefaultHttpxClient(timeout=timeout, limits=_LIMITS)
    return _with_fast_bodies(client, headers_timeout)


# The SDKs' `DefaultHttpxClient` settings (openai and anthropic alike): many connections,
# redirects followed, and TCP keep-alive probes on their own transport, so that a stream
# silent for minutes behind a NAT is not dropped by it. Unlike theirs (100), every
# connection may stay in the pool between requests (for 5 s, httpx2's keep-alive expiry):
# a burst of streams at once (many /v1 clients) leaves its connections to the next one,
# which then opens none.
_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
_KEEPALIVE: list[tuple[int, int, int | bool]] = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, True)]
for _name, _value in (("TCP_KEEPINTVL", 60), ("TCP_KEEPCNT", 5), ("TCP_KEEPIDLE", 60)):
    if hasattr(socket, _name):
        _KEEPALIVE.append((socket.IPPROTO_TCP, getattr(socket, _name), _value))


def wire_http_client(transport: Any, timeout: Any, headers_timeout: float | None = None) -> Any:
    """An httpx2 client set up as the SDKs' default one, for requests Numi sends without
    an SDK (anthropic_wire.py), on `transport` when given, with the same fast body path
    and response-head deadline as `sdk_http_client`."""
    if transport is None:
        transport = httpx2.HTTPTransport(limits=_LIMITS, socket_options=_KEEPALIVE)
    client = httpx2.Client(
        transport=transport, timeout=timeout, limits=_LIMITS, follow_redirects=True
    )
    return _with_fast_bodies(client, headers_timeout)


def _with_fast_bodies(client: Any, headers_timeout: float | None) -> Any:
    for carrier in [client._transport, *getattr(client, "_mounts", {}).values()]:
        pool = getattr(carrier, "_pool", None)
        if pool is not None and not isinstance(pool, _FastBodyPool):
            if type(getattr(pool, "_network_backend", None)) is SyncBackend:
                pool._network_backend = AddressBackend()
            carrier._pool = _FastBodyPool(pool, headers_timeout)
    return client


class AddressBackend(SyncBackend):
    """httpcore2's own backend, connecting to an IP address without a name lookup.

    `socket.create_connection` asks `getaddrinfo` even for "127.0.0.1", and under gevent
    every lookup goes to the threadpool resolver: a hand-off to a native thread and back
    for each new connection to a provider, 7 % of a 100-stream run's server samples while
    its turns started (issue 45). A local model server (Ollama, llama.cpp) is most often
    addressed by IP. A name still takes httpcore2's path, lookup and all; the socket, its
    options and the errors are those of that path."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        family = _address_family(host)
        if family is None or local_address is not None:
            return super().connect_tcp(host, port, timeout, local_address, socket_options)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect((host, port))
            for option in socket_options or []:
                sock.setsockopt(*option)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException as exc:
            sock.close()
            if isinstance(exc, socket.timeout):
                raise ConnectTimeout(exc) from exc
            if isinstance(exc, OSError):
                raise ConnectError(exc) from exc
            raise
        return SyncStream(sock)


def _address_family(host: str) -> int | None:
    """AF_INET or AF_INET6 for an IP address written as one, else None (a name)."""
    if not host or not (host[0].isdigit() or ":" in host):
        return None  # a name: no parse attempted
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return socket.AF_INET6 if address.version == 6 else socket.AF_INET


def body_chunks(response: Any) -> Iterable[bytes] | None:
    """The body of an httpx2 streaming `response` to iterate directly, when it is read by
    `ChunkedBody` and not content-encoded; else None (use `iter_bytes`).

    httpx2's `iter_raw` and `iter_bytes` and an SDK's own `iter_bytes` add a generator
    frame each, a chunker and an identity decoder per read, and do nothing to an
    identity-encoded stream. What is iterated here is still httpx2's own stream
    (elapsed time on close, and httpcore2's errors mapped to httpx2's).
    """
    bound = getattr(response, "stream", None)
    if type(bound) is not BoundSyncStream or response.is_stream_consumed:
        return None
    mapped = bound._stream
    if type(mapped) is not ResponseStream or type(mapped._httpcore_stream) is not ChunkedBody:
        return None
    if response.headers.get("content-encoding", "identity").lower() != "identity":
        return None
    response.is_stream_consumed = True  # as iter_raw marks it: the body is read once
    return bound


# How long the end of a body may take once its stream's last event has arrived
# (`finish_body`), and how much of it is read, before the connection is closed instead.
END_SECONDS = 0.25
END_BYTES = READ_BYTES


def finish_body(body: Iterator[bytes], response: Any) -> None:
    """Read the rest of a chunked body that `body` (the iterator of `body_chunks`) has been
    reading, when its last event has arrived: normally only the last chunk is left. Done
    within END_SECONDS and END_BYTES, the response ends as a read body does (the pool keeps
    the connection); otherwise, or on any failure, the caller's close closes it, as it
    would have before."""
    try:
        fast = response.stream._stream._httpcore_stream
    except AttributeError:
        return
    if type(fast) is not ChunkedBody:
        return
    fast.expect_end(END_SECONDS)
    read = 0
    try:
        for piece in body:
            read += len(piece)
            if read > END_BYTES:
                return
    except Exception:  # a timeout, a reset: the connection is not kept, as before
        return


class _FastBodyPool:
    """httpcore2's connection pool, whose chunked HTTP/1.1 response bodies are read by
    `ChunkedBody`, and whose response heads are read within `headers_timeout`. Everything
    else is the pool's."""

    def __init__(self, pool: Any, headers_timeout: float | None = None) -> None:
        self._pool = pool
        self._headers_timeout = headers_timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def __enter__(self) -> Any:
        self._pool.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.__exit__(*exc)

    def handle_request(self, request: Any) -> Any:
        # httpcore2 reads the head and the body with the request's read timeout, looked up
        # at each read: the head's is set for the call, the body's is back once it returns.
        timeouts = request.extensions.get("timeout")
        read = timeouts.get("read") if isinstance(timeouts, dict) else None
        shorter = self._headers_timeout is not None and (
            read is None or self._headers_timeout < read
        )
        if shorter:
            timeouts["read"] = self._headers_timeout
        try:
            response = self._pool.handle_request(request)
        finally:
            if shorter:
                timeouts["read"] = read
        body = ChunkedBody.take_over(response, request)
        if body is not None:
            response.stream = body
        return response


class ChunkedBody:
    """The body of one chunked HTTP/1.1 response, read from the connection's socket.
    Iterate for the body's bytes (one piece per socket read); `close()` ends the response
    as httpcore2's own stream does (the connection goes back to the pool once the body was
    read to its end, and is closed otherwise)."""

    def __init__(self, pool_stream: Any, connection: Any, timeout: float | None) -> None:
        self._pool_stream = pool_stream
        self._connection = connection
        self._timeout = timeout

    @classmethod
    def take_over(cls, response: Any, request: Any) -> ChunkedBody | None:
        """The fast body for `response`, or None to leave it to httpcore2."""
        pool_stream = response.stream
        inner = getattr(pool_stream, "_stream", None)
        if not isinstance(inner, HTTP11ConnectionByteStream) or "trace" in request.extensions:
            return None
        encodings = [v.lower() for k, v in response.headers if k.lower() == b"transfer-encoding"]
        if encodings != [b"chunked"]:
            return None
        connection = inner._connection
        state = getattr(connection, "_h11_state", None)
        reader = getattr(state, "_reader", None)
        if not isinstance(state, h11.Connection) or type(reader) is not ChunkedReader:
            return None
        if not hasattr(state, "_receive_buffer") or state.their_state is not h11.SEND_BODY:
            return None
        return cls(pool_stream, connection, request.extensions.get("timeout", {}).get("read"))

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._read()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._pool_stream.close()

    def expect_end(self, seconds: float) -> None:
        """From now on each read waits at most `seconds` (see `finish_body`)."""
        self._timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    _sock: Any = None

    def _read(self) -> Iterator[bytes]:
        state = self._connection._h11_state
        # What h11 read past the headers is decoded by h11 itself, until it wants more.
        while True:
            try:
                event = state.next_event()
            except h11.RemoteProtocolError as exc:
                raise RemoteProtocolError(str(exc)) from exc
            if event is h11.NEED_DATA:
                break
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
        reader = state._reader
        left, discard = reader._bytes_in_chunk, reader._bytes_to_discard
        trailer = reader._reading_trailer
        buffer = bytes(state._receive_buffer)
        state._receive_buffer.__init__()  # from here on the bytes are read here
        network = self._connection._network_stream
        if type(network) is SyncStream:
            # Its socket (TCP or TLS) read directly: the timeout set once, not per read,
            # and no context manager per read to map errors (SyncStream.read maps them so).
            sock = self._sock = network._sock
            sock.settimeout(self._timeout)
            recv = sock.recv
        else:
            recv = None
        done = False
        while not done:
            if recv is None:
                data = network.read(READ_BYTES, timeout=self._timeout)
            else:
                try:
                    data = recv(READ_BYTES)
                except socket.timeout as exc:
                    raise ReadTimeout(exc) from exc
                except OSError as exc:
                    raise ReadError(exc) from exc
            if not data:
                raise RemoteProtocolError(_INCOMPLETE)
            if not (buffer or left or discard or trailer):
                # A read that is exactly one whole chunk: a streamed token, the usual case.
                whole = _whole_chunk(data, 0)
                if whole is not None and whole[1] + 2 == len(data):
                    yield data[whole[0] : whole[1]]
                    continue
            buffer = buffer + data if buffer else data
            out, buffer, left, discard, trailer, done = _unframe(buffer, left, discard, trailer)
            if out:
                yield out
        # h11 sees the last chunk, so the connection ends this response as it would have.
        reader._bytes_in_chunk, reader._bytes_to_discard, reader._reading_trailer = 0, b"", False
        state.receive_data(b"0\r\n\r\n" + buffer)
        event = state.next_event()
        if not isinstance(event, h11.EndOfMessage):  # pragma: no cover - h11 changed
            raise RemoteProtocolError(f"unexpected end of body: {event!r}")


def _unframe(
    buffer: bytes, left: int, discard: bytes, trailer: bool
) -> tuple[bytes, bytes, int, bytes, bool, bool]:
    """Decode the complete chunks in `buffer`: (data, what is left undecoded, bytes left in
    the current chunk, the CRLF still to skip, in the trailer, body done)."""
    out = []
    pos, size = 0, len(buffer)
    while pos < size:
        if not (left or discard or trailer):
            # A whole chunk in one match and one slice: what a stream's read nearly always
            # holds. Anything else takes the steps below.
            whole = _whole_chunk(buffer, pos)
            if whole is not None:
                out.append(buffer[whole[0] : whole[1]])
                pos = whole[1] + 2
                continue
        if trailer:
            if buffer.startswith(b"\r\n", pos):
                return b"".join(out), buffer[pos + 2 :], 0, b"", False, True
            end = buffer.find(b"\r\n\r\n", pos)
            if end < 0:
                break
            return b"".join(out), buffer[end + 4 :], 0, b"", False, True
        if discard:
            got = buffer[pos : pos + len(discard)]
            if got != discard[: len(got)]:
                raise _protocol_error(f"malformed chunk footer: {got!r}")
            pos += len(got)
            discard = discard[len(got) :]
            continue
        if left:
            piece = buffer[pos : pos + left]
            out.append(piece)
            pos += len(piece)
            left -= len(piece)
            if not left:
                discard = b"\r\n"
            continue
        end = buffer.find(b"\r\n", pos)
        if end < 0:
            break
        match = _CHUNK_SIZE.fullmatch(buffer, pos, end)
        if match is None:
            raise _protocol_error(f"illegal chunk header: {buffer[pos:end][:40]!r}")
        left = int(match.group(1), 16)
        pos = end + 2
        if not left:
            trailer = True
    rest = buffer[pos:]
    if len(rest) > MAX_LINE and not left and not discard:
        raise _protocol_error("chunk header or trailer too long")
    return b"".join(out), rest, left, discard, trailer, False


def _whole_chunk(buffer: bytes, pos: int) -> tuple[int, int] | None:
    """(start, end) of the data of the non-empty chunk at `pos` when its size line, data
    and CRLF are all in `buffer`; else None (the last chunk, or one not complete yet)."""
    line = _CHUNK_LINE.match(buffer, pos)
    if line is None:
        return None
    start = line.end()
    end = start + int(line.group(1), 16)
    if end > start and buffer[end : end + 2] == b"\r\n":
        return start, end
    return None


def _protocol_error(message: str) -> Exception:
    return RemoteProtocolError(message)
