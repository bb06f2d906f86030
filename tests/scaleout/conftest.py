"""Fixtures for the scale-out tests: processes sharing one PostgreSQL schema and one Redis
key prefix (see tests/conftest.py for `postgres_module_url` and `redis_settings`)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from server_wait import wait_until_ready
from turn_support import ACCESS_TOKEN, Socket, free_port, turn_server_env

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


class PrivateRedis:
    def __init__(self, directory):
        self.port = free_port()
        self.directory = directory
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until_ready(self.proc, answers, what="redis-server")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def private_redis(tmp_path):
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("redis-server is missing in CI (.ci/run installs it)")
        pytest.skip("redis-server is not installed")
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()
