"""How a WebSocket ends (issue 35): a client that sends its close frame twice (a
non-browser client, or one that closes while its first close is on the way) is ordinary,
not an error in the server's log."""

from __future__ import annotations

import base64
import os
import socket
import struct

from turn_support import Api, make_chat


def _masked_close(code: int) -> bytes:
    """A client's close frame (clients mask every frame, RFC 6455 §5.3)."""
    payload = struct.pack("!H", code)
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes((0x88, 0x80 | len(payload))) + mask + body


def _open_raw_socket(server, chat_id: str) -> socket.socket:
    """A WebSocket opened by hand on a plain TCP socket: the 101 answer read, nothing more."""
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
        "Origin": server.url,
        **server.headers,
    }
    request = f"GET /ws/{chat_id}?format=json HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    connection.sendall(request.encode() + b"\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = connection.recv(4096)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return connection


def _read_until_closed(connection: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := connection.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_a_second_close_frame_is_not_an_error_in_the_log(live_server, scripted):
    chat = make_chat(Api(live_server.url), scripted)
    before = len(live_server.log())
    for together in (False, True):
        connection = _open_raw_socket(live_server, chat["id"])
        if together:
            connection.sendall(_masked_close(1000) + _masked_close(1000))
        else:  # the second after the server's answer to the first
            connection.sendall(_masked_close(1000))
            assert connection.recv(4096).startswith(b"\x88")
            connection.sendall(_masked_close(1000))
        try:
            received = _read_until_closed(connection)
        except TimeoutError:
            raise AssertionError("the server kept the ended WebSocket's connection open") from None
        finally:
            connection.close()
        assert b"HTTP/1.1" not in received, received  # no answer to the frame as a request
    log = live_server.log()[before:]
    assert "ERROR" not in log and "Invalid HTTP method" not in log, log
