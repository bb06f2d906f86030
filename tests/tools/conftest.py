"""Fixtures for the tool tests: loopback web servers (tools_web_support.py). The scripted
provider, the live server and the clients come from tests/conftest.py and turn_support.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools_web_support import WebServers  # noqa: E402


@pytest.fixture(scope="session")
def web() -> Iterator[WebServers]:
    servers = WebServers()
    yield servers
    servers.close()
