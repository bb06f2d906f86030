"""Fixtures for context, compaction and attachment tests: the scripted provider and a live
server (reusing the turn tests' helpers), plus direct database builders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "turns"))

from numi.testing import ScriptedProvider  # noqa: E402
from turn_support import Api, Socket, turn_server_env  # noqa: E402


@pytest.fixture(scope="session")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def scripted(provider: ScriptedProvider) -> Iterator[ScriptedProvider]:
    provider.reset()
    yield provider
    provider.release()


@pytest.fixture(scope="module")
def server(live_server_factory):
    return live_server_factory(**turn_server_env())


@pytest.fixture
def api(server) -> Api:
    return Api(server.url)


@pytest.fixture
def sockets(server):
    opened: list[Socket] = []

    def open_socket(chat_id: str, **kwargs) -> Socket:
        sock = Socket(server, chat_id, **kwargs)
        opened.append(sock)
        return sock

    yield open_socket
    for sock in opened:
        sock.close()
