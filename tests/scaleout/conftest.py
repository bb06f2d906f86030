"""Fixtures for the scale-out tests: processes sharing one PostgreSQL schema and one Redis
key prefix (see tests/conftest.py for `postgres_module_url` and `redis_settings`)."""

from __future__ import annotations

import pytest

from turn_support import ACCESS_TOKEN, Socket, turn_server_env

SECRET = "scale-out-test-secret"


@pytest.fixture(scope="module")
def cluster_env(postgres_module_url, redis_settings, tmp_path_factory):
    """What every process of the cluster shares: database, Redis prefix, secret, data dir."""
    data_dir = tmp_path_factory.mktemp("shared") / "data"
    return turn_server_env(
        NUMI_DATABASE_URL=postgres_module_url,
        NUMI_SECRET_KEY=SECRET,
        NUMI_DATA_DIR=str(data_dir),
        NUMI_TURN_LEASE_MS=1500,
        NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
        **redis_settings(),
    )


@pytest.fixture(scope="module")
def pair(live_server_factory, cluster_env):
    """Processes A and B (B started after A has migrated the database)."""
    a = live_server_factory(**cluster_env)
    b = live_server_factory(**cluster_env)
    yield a, b
    b.stop()
    a.stop()


@pytest.fixture
def sockets():
    """`sockets(server, chat_id)` opens a WebSocket client on that server; closed after."""
    opened = []

    def open_socket(server, chat_id: str, **kwargs):
        sock = Socket(server, chat_id, **kwargs)
        opened.append(sock)
        return sock

    yield open_socket
    for sock in opened:
        sock.close()
