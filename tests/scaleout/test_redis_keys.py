"""Redis key layout: every key of a chat carries its group's hash tag, so each Lua script
and each read touches one cluster slot (numi/turns/redis_keys.py: GROUPS)."""

from __future__ import annotations

import re

import pytest
import redis

from numi.testing import Scenario
from numi.turns.redis_keys import chat_group
from turn_support import Api, make_chat, turn_server_env, types

pytestmark = pytest.mark.redis

PREFIX = "numi-keys:"


def test_every_key_of_a_turn_carries_its_chats_group_tag(
    live_server_factory, private_redis, scripted, sockets
):
    server = live_server_factory(
        **turn_server_env(NUMI_REDIS_URL=private_redis.url, NUMI_REDIS_PREFIX=PREFIX)
    )
    chats = [make_chat(Api(server.url), scripted) for _ in range(3)]
    for chat in chats:
        scripted.enqueue(Scenario().text("Tagged answer.", chunks=3))
        socket = sockets(server, chat["id"])
        socket.send(type="send", message="Hello")
        assert "done" in types(socket.events_until("turn_end"))
    keys = [key.decode() for key in redis.Redis.from_url(private_redis.url).keys("*")]
    chat_keys = 0
    for key in keys:
        match = re.fullmatch(re.escape(PREFIX) + r"\{(\d+)\}(.*)", key)
        assert match, f"{key} has no group hash tag"
        named = re.fullmatch(r"c:([0-9a-f-]+):(seq|events|turn|lease)", match[2])
        if named:
            chat_keys += 1
            assert int(match[1]) == chat_group(named[1]), key
        else:
            assert re.fullmatch(r"running|alive|recovering|wake:[\w-]+", match[2]), key
    assert chat_keys >= 3 * 3  # seq, events and turn of every chat (the lease went)
