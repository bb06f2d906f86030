"""A WebSocket message flood (issue 28 item 9): one socket sending as fast as it can is
told `rate_limited_client` and closed with 1008, and another client's request during the
flood is answered about as fast as during a few harmless messages, in the same run."""

from __future__ import annotations

import pytest

import json

from availability_support import slowest_during
from simple_websocket import ConnectionClosed
from turn_support import Api, Socket
from wsproto.utilities import LocalProtocolError

# Compares timings within one run: runs alone, after the parallel suite (Makefile).
pytestmark = pytest.mark.alone

FLOOD = 20_000  # messages the flooding client tries to send (the old server read them all)
# A message the server refuses cheaply: the cost is in reading and answering each one.
MESSAGE = json.dumps({"type": "nonsense"})


def _send(socket: Socket, count: int) -> int:
    """Send `count` messages, or as many as the server lets through; how many went out."""
    for sent in range(count):
        try:
            socket.ws.send(MESSAGE)
        # Closed by the server: the client refuses to send (or has dropped its socket).
        except (ConnectionClosed, LocalProtocolError, OSError):
            return sent
    return count


def _replies(socket: Socket) -> list[dict]:
    """What the server sent until it closed the socket (or went quiet for 10 s)."""
    replies = []
    while True:
        try:
            replies.append(socket.receive(timeout=10))
        except (ConnectionClosed, TimeoutError):
            return replies


def test_a_flooding_socket_is_closed_and_others_are_served(live_server):
    status, chat = Api(live_server.url).post("/api/session", {"title": "flood"})
    assert status == 201, chat
    url, headers = live_server.url + "/api/sessions", live_server.headers

    harmless = Socket(live_server, chat["id"])
    harmless_slowest, sent = slowest_during(lambda: _send(harmless, 5), url, headers)
    assert sent == 5
    codes = [harmless.receive()["data"]["code"] for _ in range(5)]
    assert codes == ["unknown_type"] * 5  # a few messages are read and answered
    assert harmless.ws.connected
    harmless.close()

    flooding = Socket(live_server, chat["id"])
    flood_slowest, sent = slowest_during(lambda: _send(flooding, FLOOD), url, headers)
    replies = _replies(flooding)
    codes = [r["data"]["code"] for r in replies if r["type"] == "error"]
    assert codes and codes[-1] == "rate_limited_client", codes[-5:]
    assert codes.count("unknown_type") <= 2 * 40  # the burst, not the flood
    assert not flooding.ws.connected
    assert (flooding.ws.close_reason, flooding.ws.close_message) == (1008, "too many messages")
    # Before the fix the server answered all 20,000; another client's request waited
    # behind them (seconds against milliseconds).
    assert flood_slowest < 5 * harmless_slowest + 0.5, (flood_slowest, harmless_slowest)

    # The chat's other sockets still work.
    again = Socket(live_server, chat["id"])
    again.send(type="nonsense")
    assert again.receive()["data"]["code"] == "unknown_type"
    again.close()
