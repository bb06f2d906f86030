"""Slowloris (issue 28 item 15): `numi serve` closes a connection whose request headers do
not arrive within NUMI_HEADER_TIMEOUT_SECONDS, and serves everyone else meanwhile."""

from __future__ import annotations

import socket
import urllib.request

import pytest


@pytest.fixture(scope="module")
def server(live_server_factory):
    return live_server_factory(NUMI_HEADER_TIMEOUT_SECONDS="1")


def _closed_by_server(connection: socket.socket, wait: float) -> bool:
    """Whether the server closes the connection within `wait` seconds (reading EOF)."""
    connection.settimeout(wait)
    try:
        while connection.recv(4096):
            pass  # (a 400 answer may come first)
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_half_sent_request_is_closed_and_others_are_served(server):
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(5)]
    for connection in slow:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
    idle = socket.create_connection(("127.0.0.1", server.port))  # not even a request line
    with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
        assert response.status == 200  # the half-sent requests hold nobody up
    # Closed at the 1 s deadline; the old server kept them open for ever.
    assert all(_closed_by_server(c, 10) for c in [*slow, idle])
    for connection in [*slow, idle]:
        connection.close()
