"""Fixtures for turn tests (the live server, the scripted provider and the clients come
from tests/conftest.py and tests/turn_support.py).

Every test here runs against both turn-channel backends: in-process ("memory") and Redis
("redis", the real server under a key prefix of the module's own). `channel_env` is the
environment that picks the backend; tests that start their own server pass it on.
"""

from __future__ import annotations

import pytest

from turn_support import make_chat, turn_server_env

CHANNEL_BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


@pytest.fixture(scope="module", params=CHANNEL_BACKENDS)
def channel_backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def channel_env(channel_backend, redis_settings) -> dict[str, str]:
    return redis_settings() if channel_backend == "redis" else {}


@pytest.fixture(scope="module")
def server(live_server_factory, channel_env):
    """A live `numi serve` with the turn tests' tools on this module's channel backend."""
    started = live_server_factory(**turn_server_env(**channel_env))
    yield started
    started.stop()


@pytest.fixture
def chat(api, scripted):
    return make_chat(api, scripted)
