"""Shared set-up for the document-search and MCP tool tests: the turn-test helpers
(tests/turns/turn_support.py) on the import path, and the scripted-provider fixtures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

TURNS = str(Path(__file__).resolve().parent.parent / "turns")
if TURNS not in sys.path:
    sys.path.append(TURNS)  # appended: tests/tools modules (e.g. its conftest) win over tests/turns ones

from numi.testing import ScriptedProvider  # noqa: E402


@pytest.fixture(scope="module")
def rag_mcp_provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def scripted(rag_mcp_provider: ScriptedProvider) -> Iterator[ScriptedProvider]:
    rag_mcp_provider.reset()
    yield rag_mcp_provider
    rag_mcp_provider.release()
