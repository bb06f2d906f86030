"""Fixtures for the tool tests: loopback web servers (tools_web_support.py) and the
scripted provider; the live-server helpers come from tests/turns/turn_support.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "turns"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from numi.testing import ScriptedProvider  # noqa: E402
from tools_web_support import WebServers  # noqa: E402


@pytest.fixture(scope="session")
def web() -> Iterator[WebServers]:
    servers = WebServers()
    yield servers
    servers.close()


@pytest.fixture(scope="session")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def scripted(provider: ScriptedProvider) -> Iterator[ScriptedProvider]:
    provider.reset()
    yield provider
    provider.release()
