"""The SDK clients' fast read path for chunked bodies (numi.providers.transport), against a
plain socket server that writes HTTP/1.1 byte for byte: chunk framing split anywhere,
chunk extensions, trailers, keep-alive, truncation, stalls and malformed framing."""

from __future__ import annotations

import gzip
import socket
import threading

import httpx2
import openai
import pytest

from numi.providers.transport import ChunkedBody, body_chunks, sdk_http_client

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class RawServer:
    """Answers each request on a connection with the next scripted list of writes (each
    a bytes to send, or None: wait until the test says go). Counts connections."""

    def __init__(self, answers: list[list[bytes | None]]):
        self.answers = list(answers)
        self.connections = 0
        self.go = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buffer = b""
            while self.answers:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                for write in self.answers.pop(0):
                    if write is None:
                        self.go.wait(10)
                    elif write == b"CLOSE":
                        return
                    else:
                        conn.sendall(write)

    def close(self) -> None:
        self.listener.close()


def _client(read_timeout: float = 5.0):
    return sdk_http_client(openai, None, httpx2.Timeout(read_timeout, connect=5.0))


def _fast(response) -> bool:
    # httpx2's client stream -> its transport's stream -> what the pool answered.
    return isinstance(response.stream._stream._httpcore_stream, ChunkedBody)


def _chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


PIECES = [b'data: {"a": 1}\n\n', b'data: {"b"', b": 2}\n\n", b"x" * 70000, b": keep\n\n"]


@pytest.mark.parametrize("split", [1, 2, 3, 5, 7, 4096, 70001])
def test_chunked_bodies_split_anywhere_decode_and_keep_the_connection(split):
    raw = HEAD + _chunked(PIECES)
    writes = [raw[i : i + split] for i in range(0, len(raw), split)]
    server = RawServer([writes, [HEAD + _chunked([b"second"])]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/v1/chat"
            with client.stream("POST", url, json={"x": 1}) as response:
                assert _fast(response)
                assert b"".join(response.iter_raw()) == b"".join(PIECES)
            with client.stream("POST", url, json={"x": 2}) as response:
                assert response.read() == b"second"
        assert server.connections == 1, "the connection was kept alive and reused"
    finally:
        server.close()


def test_chunk_extensions_and_trailers_are_read_past():
    body = b"5;name=value\r\nhello\r\n6 \r\n world\r\n0\r\nX-Checksum: 1\r\nX-More: 2\r\n\r\n"
    server = RawServer([[HEAD[:-2] + b"\r\n", body[:9], body[9:]], [HEAD + _chunked([b"ok"])]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/"
            with client.stream("GET", url) as response:
                response.read()  # what the headers' read left to h11 is decoded by h11
            assert response.content == b"hello world"
            assert client.get(url).content == b"ok"
        assert server.connections == 1
    finally:
        server.close()


def test_a_body_cut_off_mid_chunk_is_a_protocol_error_and_the_connection_is_not_reused():
    server = RawServer([[HEAD, b"10\r\n0123456789", b"CLOSE"], [HEAD + _chunked([b"after"])]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/"
            with client.stream("GET", url) as response:
                got = []
                with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"):
                    for piece in response.iter_raw():
                        got.append(piece)
            assert b"".join(got) == b"0123456789"
            assert client.get(url).content == b"after"
        assert server.connections == 2
    finally:
        server.close()


@pytest.mark.parametrize(
    "bad",
    [
        b"zz\r\n",
        b"0x5\r\nhello\r\n",
        b"5\r\nhelloXX",
        # Each write is likely one read: what the one-whole-chunk fast path sees, wrong.
        b"3\r\nabcd\r\n",
        b"3\r\nab\r\n\r\n",
    ],
)
def test_malformed_framing_is_a_protocol_error(bad):
    server = RawServer([[HEAD, b"3\r\nabc\r\n", bad, None]])
    try:
        with _client() as client, client.stream("GET", f"http://127.0.0.1:{server.port}/") as r:
            with pytest.raises(httpx2.RemoteProtocolError, match="chunk"):
                r.read()
    finally:
        server.go.set()
        server.close()


def test_a_stalled_body_times_out_with_the_read_timeout():
    server = RawServer([[HEAD, b"3\r\nabc\r\n", None]])
    try:
        with _client(read_timeout=0.3) as client:
            with client.stream("GET", f"http://127.0.0.1:{server.port}/") as response:
                pieces = response.iter_raw()
                assert next(pieces) == b"abc"
                with pytest.raises(httpx2.ReadTimeout):
                    next(pieces)
    finally:
        server.go.set()
        server.close()


def test_a_body_that_is_not_chunked_takes_httpcore2s_own_path():
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    server = RawServer([[plain], [plain]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/"
            with client.stream("GET", url) as response:
                assert not _fast(response)
                assert response.read() == b"hello"
            assert client.get(url).content == b"hello"
        assert server.connections == 1
    finally:
        server.close()


def test_body_chunks_iterates_a_chunked_identity_body_and_marks_it_read():
    tokens = [b'data: {"t": %d}\n\n' % i for i in range(50)] + [b"\r\n", b"0\r\n", b"x"]
    writes = [HEAD] + [b"%x\r\n%s\r\n" % (len(t), t) for t in tokens] + [b"0\r\n\r\n"]
    server = RawServer([writes, [HEAD + _chunked([b"next"])]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/"
            with client.stream("GET", url) as response:
                chunks = body_chunks(response)
                assert chunks is not None
                assert b"".join(chunks) == b"".join(tokens)
                assert response.is_stream_consumed
                with pytest.raises(httpx2.StreamConsumed):
                    response.read()
            assert client.get(url).content == b"next"
        assert server.connections == 1
    finally:
        server.close()


def test_body_chunks_leaves_encoded_or_unchunked_bodies_to_iter_bytes():
    packed = gzip.compress(b"hello gzip")
    gzipped = HEAD[:-2] + b"Content-Encoding: gzip\r\n\r\n" + _chunked([packed[:7], packed[7:]])
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    server = RawServer([[gzipped], [plain]])
    try:
        with _client() as client:
            url = f"http://127.0.0.1:{server.port}/"
            with client.stream("GET", url) as response:
                assert body_chunks(response) is None
                assert b"".join(response.iter_bytes()) == b"hello gzip"
            with client.stream("GET", url) as response:
                assert body_chunks(response) is None
                assert response.read() == b"hello"
    finally:
        server.close()


# --- connecting to an IP address without a name lookup ----------------------------------


def test_an_ip_address_is_connected_without_a_name_lookup(monkeypatch):
    """Under gevent every getaddrinfo is a trip to the threadpool; an address needs none.
    A name still goes through the lookup; a refused address is httpx2's ConnectError."""
    server = RawServer([[HEAD, b"2\r\nok\r\n0\r\n\r\n"]])
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        looked_up.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    client = sdk_http_client(openai, None, httpx2.Timeout(5.0))
    try:
        with client.stream("GET", f"http://127.0.0.1:{server.port}/") as response:
            assert b"".join(response.iter_raw()) == b"ok"
        assert looked_up == []

        with pytest.raises(httpx2.ConnectError):
            client.get(f"http://127.0.0.1:{_closed_port()}/")
        assert looked_up == []

        with pytest.raises(httpx2.ConnectError):
            client.get(f"http://localhost:{_closed_port()}/")
        assert looked_up == ["localhost"]
    finally:
        client.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answer_frames(text: str) -> list[bytes]:
    event = b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}, "finish_reason": "stop"}]}\n\n'
    return [HEAD, _chunked([event % text.encode()])[: -len(END)]]


def _relay_once(adapter) -> str:
    """One answer read as the gateway's relay reads it: up to Finish, then closed."""
    from numi.providers import ChatRequest, Finish, TextDelta

    stream = adapter.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "q"}]))
    text = []
    for event in stream:
        if isinstance(event, TextDelta):
            text.append(event.text)
        if isinstance(event, Finish):
            break
    stream.close()
    return "".join(text)


DONE = b"e\r\ndata: [DONE]\n\n\r\n"
END = b"0\r\n\r\n"


@pytest.mark.parametrize("together", [True, False])
def test_a_stream_ended_by_done_leaves_its_connection_for_the_next_request(together):
    # The body's last chunk comes with `data: [DONE]` or in a write of its own just after.
    # The first request is the SDK's, the next ones are sent on its client (openai_base).
    answers = [
        [*_answer_frames(text), DONE + END] if together else [*_answer_frames(text), DONE, END]
        for text in ("one", "two", "three")
    ]
    server = RawServer(answers)
    try:
        from numi.providers import get_adapter

        adapter = get_adapter("openai_chat", f"http://127.0.0.1:{server.port}/v1", "k")
        assert [_relay_once(adapter) for _ in answers] == ["one", "two", "three"]
        assert server.connections == 1, "each request went on the first one's connection"
        adapter.close()
    finally:
        server.close()


def test_a_body_that_goes_on_after_done_is_closed_not_waited_for():
    # [DONE] and then nothing (the body never ends): the connection is closed after a short
    # wait, not kept for the read timeout, and the next request makes a new one.
    server = RawServer([[*_answer_frames("one"), DONE, None], [*_answer_frames("two"), DONE + END]])
    try:
        from numi.providers import get_adapter

        adapter = get_adapter("openai_chat", f"http://127.0.0.1:{server.port}/v1", "k", timeout=600)
        closed = threading.Event()
        texts = []

        def relay() -> None:
            texts.append(_relay_once(adapter))
            closed.set()

        threading.Thread(target=relay, daemon=True).start()
        assert closed.wait(60), "closing waited for the body's end"
        server.go.set()
        assert texts == ["one"]
        assert _relay_once(adapter) == "two"
        assert server.connections == 2
        adapter.close()
    finally:
        server.close()
