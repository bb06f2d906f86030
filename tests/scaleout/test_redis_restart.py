"""Redis itself restarting mid-turn (a private redis-server without persistence, so its
data is gone): the turn goes on in its process and connected clients miss nothing."""

from __future__ import annotations

import time

import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, of_type, turn_server_env, types

pytestmark = pytest.mark.redis


def test_a_turn_survives_a_redis_restart_and_its_client_misses_nothing(
    live_server_factory, private_redis, scripted, sockets
):
    server = live_server_factory(
        **turn_server_env(NUMI_REDIS_URL=private_redis.url, NUMI_TURN_LEASE_MS=1500)
    )
    api = Api(server.url)
    chat = make_chat(api, scripted)
    text = " ".join(f"r{i}" for i in range(60))
    scripted.enqueue(Scenario().text(text, chunks=60).delay(0.05))
    watcher = sockets(server, chat["id"])
    watcher.send(type="send", message="Keep going")
    events = watcher.events_until("content")
    private_redis.kill()  # everything in Redis is lost
    time.sleep(0.5)  # the turn streams on meanwhile (not a wait for a result)
    private_redis.start()
    events += watcher.events_until("turn_end", timeout=60)
    assert "done" in types(events) and not of_type(events, "error")
    ids = [e["event_id"] for e in events]
    assert ids == sorted(set(ids)), "ids keep increasing"
    assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == text
    assert api.history(chat["id"])[-1]["content"] == text
    # The chat is free again and works as before.
    scripted.enqueue(Scenario().text("After the restart."))
    watcher.send(type="send", message="Again")
    assert "done" in types(watcher.events_until("turn_end"))
