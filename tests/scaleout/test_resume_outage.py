"""A reconnect while Redis is down (issue 35, reliability item 3): a resume whose backlog
cannot be read is answered `live_unavailable`, never `internal_error`, and its
subscription is tried again until Redis is back; no socket is left following nothing."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, turn_server_env

pytestmark = pytest.mark.redis

RESUMES = 20


def answer_seen(socket) -> str:
    """The text of the turn the socket follows, up to its end: from its events, or from a
    snapshot when the socket subscribed again after the turn had streamed (or ended)."""
    text = ""
    while True:
        event = socket.receive(timeout=30)
        if event["type"] == "snapshot" and event["turn_id"] is not None:
            text = event["data"]["content"]
            if event["data"]["finished"]:
                return text
        elif event["type"] == "content":
            text += event["data"]["delta"]
        elif event["type"] == "turn_end":
            return text


def test_resumes_during_a_redis_outage_are_told_and_subscribed_once_it_is_back(
    live_server_factory, private_redis, scripted, sockets
):
    # A short lease: after Redis lost its data, new turns wait one lease for the old owners.
    server = live_server_factory(
        **turn_server_env(
            NUMI_REDIS_URL=private_redis.url,
            NUMI_REDIS_PREFIX="numi-outage:",
            NUMI_TURN_LEASE_MS=1500,
        )
    )
    chat = make_chat(Api(server.url), scripted)
    scripted.enqueue(Scenario().text("Before the outage."), Scenario().text("After it."))
    watcher = sockets(server, chat["id"])  # this process follows the chat from now on
    watcher.send(type="send", message="First", request_id="first")
    last = watcher.events_until("turn_end")[-1]["event_id"]
    private_redis.kill()
    resumed = []
    for attempt in range(RESUMES):
        socket = sockets(server, chat["id"])
        socket.send(type="resume", last_event_id=last if attempt % 2 else None)
        reply = socket.receive(timeout=15)
        assert reply["type"] == "error", reply
        assert reply["data"]["code"] == "live_unavailable", reply
        resumed.append(socket)
    private_redis.start()
    watcher.send(type="send", message="Second", request_id="second")
    for socket in [watcher, *resumed]:
        assert answer_seen(socket) == "After it."
