"""Fixtures for turn tests (the live server, the scripted provider and the clients come
from tests/conftest.py and tests/turn_support.py)."""

from __future__ import annotations

import pytest

from turn_support import make_chat


@pytest.fixture
def chat(api, scripted):
    return make_chat(api, scripted)
