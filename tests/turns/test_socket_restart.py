"""A graceful stop with WebSockets open (issue 35, reliability item 4): once the turns are
stopped and saved, each socket gets what its turn published last and is closed with 1012
(service restart), so the process exits instead of waiting for every tab to go (gunicorn
waited its whole graceful_timeout, then killed the worker). Both servers, both backends."""

from __future__ import annotations

import signal

import pytest
from simple_websocket import ConnectionClosed

from numi.testing import Scenario
from test_turn_restarts import content_until
from turn_support import Api, Socket, make_chat, of_type, turn_server_env

# Far above what the stop needs, far below gunicorn's graceful_timeout (30 s): a server
# still running at this deadline is waiting for its sockets.
HANG_DEADLINE = 20


def close_code(socket: Socket, timeout: float = HANG_DEADLINE) -> int | None:
    """Read the socket until the server closes it; the close code it sent."""
    try:
        while True:
            socket.ws.receive(timeout=timeout) or pytest.fail("the socket was not closed")
    except ConnectionClosed:
        return socket.ws.close_reason


def test_numi_serve_closes_an_idle_socket_with_1012_and_exits(
    live_server_factory, scripted, channel_env
):
    server = live_server_factory(**turn_server_env(**channel_env))
    chat = make_chat(Api(server.url), scripted)
    idle = Socket(server, chat["id"])
    idle.send(type="resume", last_event_id=None)
    server.proc.send_signal(signal.SIGTERM)
    assert close_code(idle) == 1012
    assert server.proc.wait(HANG_DEADLINE) == 0, server.log()


def test_gunicorn_closes_sockets_with_1012_after_saving_the_turn_and_exits(
    gunicorn_server, scripted
):
    server = gunicorn_server
    api = Api(server.url)
    chat, other = make_chat(api, scripted), make_chat(api, scripted)
    idle = Socket(server, other["id"])  # a tab open on another chat, doing nothing
    idle.send(type="resume", last_event_id=None)
    scripted.enqueue(Scenario().text("Half an answer", chunks=2).stall())
    sender = Socket(server, chat["id"])
    sender.send(type="send", message="Stuck", request_id="stuck")
    events = content_until(sender, "Half an answer")
    server.proc.send_signal(signal.SIGTERM)  # the master: gunicorn's graceful stop
    events += sender.events_until("turn_end", timeout=HANG_DEADLINE)
    assert of_type(events, "error")[-1]["data"]["code"] == "interrupted"
    assert close_code(sender) == 1012
    assert close_code(idle) == 1012
    assert server.proc.wait(HANG_DEADLINE) == 0, server.log()[-3000:]
    assert "graceful timeout" not in server.log().lower()
