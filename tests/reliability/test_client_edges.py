"""Clients at the edges (issue 20 items 9-12, 14): clients that go away, oversized
WebSocket messages, SSE resumes that must end, approvals over plain HTTP, retried request
ids. A live `numi serve`, the scripted provider through the real SDKs, real WebSocket and
SSE clients, raw sockets for the rude ones."""

from __future__ import annotations

import base64
import os
import select
import socket
import struct

import pytest

from numi.testing import Scenario

from turn_support import SSE, Socket, make_chat, turn_server_env, types, wait_until
from server_wait import WAIT_SECONDS


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_LOG_LEVEL="INFO"))
    yield started
    started.stop()


def _idle(api, chat_id: str) -> bool:
    status, body = api.get(f"/api/chat/stream_status/{chat_id}")
    return status == 200 and not body["running"]


def _raw_socket(server, chat_id: str, *, html: bool) -> socket.socket:
    """A WebSocket client on a bare socket with a tiny receive buffer that never reads:
    the server's writes to it block once its buffers are full, as for a client on a dead
    link."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    key = base64.b64encode(os.urandom(16)).decode()
    path = f"/ws/{chat_id}" + ("" if html else "?format=json")
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {server.url}\r\nAuthorization: {server.headers['Authorization']}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _text_frame(text: str) -> bytes:
    """A client's masked text frame (RFC 6455 5.2)."""
    payload, mask = text.encode(), os.urandom(4)
    size = len(payload)
    header = bytes((0x81, 0x80 | size)) if size < 126 else struct.pack("!BBH", 0x81, 0xFE, size)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a client whose machine vanished does: the
    server's blocked write fails with a reset or a broken pipe."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a client whose machine vanished does: the
    server's next write fails with a reset or a broken pipe."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_clients_that_vanish_mid_answer_are_no_error_in_the_log(server, api, scripted):
    # Which of the server's two sides sees the reset first (the reader, or the relay in
    # the middle of a write) is a race: six clients of both views make both paths likely.
    before = len(server.log_path.read_bytes())
    answer = "word " * 4000
    chats, sockets = [], []
    for index in range(6):
        chat = make_chat(api, scripted)
        scripted.enqueue(Scenario().text(answer, chunks=2000).delay(0.002))
        ws = Socket(server, chat["id"], html=index % 2 == 1)
        ws.send(type="send", message="Talk", request_id=f"vanish-{index}")
        chats.append(chat)
        sockets.append(ws)
    for ws in sockets:
        assert ws.receive()  # streaming has begun
        _reset(ws.ws.sock)
    for chat in chats:
        wait_until(lambda: _idle(api, chat["id"]), timeout=60, what="the turn to end")
        assert api.history(chat["id"])[-1]["content"] == answer  # the turn went on regardless
    assert "ERROR" not in _log_since(server, before)
    logged = wait_until(
        lambda: (text := _log_since(server, before)).count("went away") >= 6 and text,
        timeout=60,
        what="the server to notice the six clients went away",
    )
    assert "Traceback" not in logged and "ERROR" not in logged, logged


def _log_since(server, offset: int) -> str:
    return server.log_path.read_bytes()[offset:].decode(errors="replace")


def _rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _close_code(sock: socket.socket) -> int | None:
    """The status code of a close frame the server sent, if one has arrived."""
    blocking = sock.getblocking()
    sock.setblocking(False)
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return None
    finally:
        sock.setblocking(blocking)
    if not data:
        return 0  # closed without a close frame
    assert data[0] & 0x0F == 0x8, data[:20]  # a close frame: the server sent nothing else
    return struct.unpack("!H", data[2:4])[0]


def test_an_oversized_websocket_message_is_refused_as_it_arrives(server, api, scripted):
    """A 40 MiB message (the limit is NUMI_MAX_MESSAGE_CHARS * 2 + 64 Ki characters, about
    465 Ki by default): the server closes with 1009 long before the end, without holding it."""
    chat = make_chat(api, scripted)
    sock = _raw_socket(server, chat["id"], html=False)
    rss_before = _rss_kb(server.proc.pid)
    size, mask = 40 * 1024 * 1024, b"\0\0\0\0"  # a zero mask: the payload goes as it is
    sock.sendall(struct.pack("!BBQ", 0x81, 0xFF, size) + mask)
    piece, sent, code = b"x" * 65536, 0, None
    try:
        # Never blocked in a send: the server stops reading once it refuses, and a sendall
        # caught with full buffers then waited for good (a CI run, pytest-timeout's 300 s)
        # while the close frame sat unread. A send goes only when the socket takes it; the
        # close frame is read as soon as it is there.
        sock.setblocking(False)
        while sent < size and code is None:
            readable, writable, _ = select.select([sock], [sock], [], WAIT_SECONDS)
            if readable:
                code = _close_code(sock)
            elif writable:
                try:
                    sent += sock.send(piece)
                except BlockingIOError:
                    pass  # full again by the time of the send: select again
            else:
                raise AssertionError(f"the socket neither took data nor closed in {WAIT_SECONDS} s")
    except (BrokenPipeError, ConnectionResetError):
        code = code or 0
    finally:
        sock.setblocking(True)
    if code is None:
        code = wait_until(lambda: _close_code(sock), what="the server's close")
    assert code == 1009, code
    assert sent < 8 * 1024 * 1024, f"the server read {sent} bytes before refusing"
    assert _rss_kb(server.proc.pid) - rss_before < 20_000  # kB: it was +41 MB before
    sock.close()
    # The server goes on serving the chat.
    ws = Socket(server, chat["id"])
    scripted.enqueue(Scenario().text("Still here."))
    ws.send(type="send", message="Hello", request_id="after-oversized")
    assert ws.events_until("turn_end")[-1]["type"] == "turn_end"
    ws.close()


# --- SSE streams that end ------------------------------------------------------------------


def test_chat_stream_carries_the_title_and_resumes_after_the_turn_end_end(server, api, scripted):
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Hello there."))
    stream = SSE(server, "POST", "/api/chat_stream", {"session": chat["id"], "message": "Hi you"})
    events = list(stream.events())  # the stream closes by itself
    stream.close()
    kinds = types(events)
    assert kinds[-2:] == ["turn_end", "title_update"], kinds
    assert events[-1]["data"]["title"] == "Hi you"
    turn_end, title = events[-2]["event_id"], events[-1]["event_id"]

    # Resumed from the turn's end: the title is replayed and the stream ends (it used to
    # send keep-alives until some later turn ended).
    resumed = SSE(
        server, "GET", f"/api/chat/resume/{chat['id']}", headers={"Last-Event-ID": str(turn_end)}
    )
    assert resumed.response.status == 200
    assert types(list(resumed.events())) == ["title_update"]
    resumed.close()
    # From the chat's last event: nothing to resume.
    latest = SSE(
        server, "GET", f"/api/chat/resume/{chat['id']}", headers={"Last-Event-ID": str(title)}
    )
    assert latest.response.status == 204
    latest.close()


# --- approvals over plain HTTP -------------------------------------------------------------


def test_an_sse_client_answers_an_approval_over_http(server, api, scripted):
    chat = make_chat(api, scripted, settings={"tools": ["guarded"]})
    scripted.enqueue(Scenario().tool_call("guarded", {"text": "ran"}))
    scripted.enqueue(Scenario().text("Done."))
    stream = SSE(server, "POST", "/api/chat_stream", {"session": chat["id"], "message": "Go"})
    events = stream.events()
    card = next(e for e in events if e["type"] == "tool_approval")["data"]
    path = f"/api/chat/approve/{chat['id']}"

    # The WebSocket's rules: an approval without the card's digest, or with another, runs
    # nothing; bad fields are a 400; a call that waits for nothing a 409; a stranger's chat 404.
    for digest in (None, "0" * 64):
        status, body = api.post(
            path, {"call_id": card["call_id"], "decision": "approve", "digest": digest}
        )
        assert (status, body["error"]["code"]) == (409, "approval_mismatch")
    status, body = api.post(path, {"call_id": card["call_id"], "decision": "maybe"})
    assert (status, body["error"]["code"]) == (400, "invalid_input")
    status, body = api.post(path, {"call_id": "nope", "decision": "deny"})
    assert (status, body["error"]["code"]) == (409, "no_such_approval")
    status, body = api.post("/api/chat/approve/not-a-chat", {"call_id": "x", "decision": "deny"})
    assert (status, body["error"]["code"]) == (404, "not_found")

    status, body = api.post(
        path, {"call_id": card["call_id"], "decision": "approve", "digest": card["digest"]}
    )
    assert (status, body) == (200, {"approved": True, "call_id": card["call_id"]})
    rest = list(events)
    stream.close()
    [end] = [e for e in rest if e["type"] == "tool_end"]
    assert end["data"]["ok"] and end["data"]["call_id"] == card["call_id"]
    assert "done" in types(rest) and "turn_end" in types(rest)
    assert api.history(chat["id"])[-1]["content"] == "Done."
