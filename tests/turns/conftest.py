"""Fixtures for turn tests: a live `numi serve` subprocess wired to the scripted provider,
and real clients (see turn_support.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from numi.testing import ScriptedProvider
from turn_support import Api, Socket, make_chat, turn_server_env


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
    """A live server for turn tests (module scope; chats keep tests apart)."""
    return live_server_factory(**turn_server_env())


@pytest.fixture
def api(server) -> Api:
    return Api(server.url)


@pytest.fixture
def chat(api, scripted):
    return make_chat(api, scripted)


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
