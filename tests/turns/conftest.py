"""Fixtures for turn tests (the live server, the scripted provider and the clients come
from tests/conftest.py and tests/turn_support.py).

Every test here runs against both turn-channel backends: in-process ("memory") and Redis
("redis", the real server under a key prefix of the module's own). `channel_env` is the
environment that picks the backend; tests that start their own server pass it on.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

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


@pytest.fixture
def gunicorn_server(tmp_path, database_templates, channel_env):
    """`gunicorn -k gevent -w 1` on this module's backend, running answers given a 1 s grace
    on SIGTERM; killed after the test if it is still running."""
    from test_turn_restarts import start_gunicorn

    if shutil.which("gunicorn", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("gunicorn is not installed (pip install -e '.[gunicorn]')")
    server = start_gunicorn(
        tmp_path, database_templates, turn_server_env(NUMI_SHUTDOWN_GRACE_SECONDS=1, **channel_env)
    )
    yield server
    if server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait(10)
