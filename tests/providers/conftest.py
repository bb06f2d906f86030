"""Fixtures for provider tests: one scripted provider server for the whole session
(reset before each test) and real adapters pointed at it through the real SDKs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from provider_test_support import KINDS

from numi.providers import RetryPolicy, get_adapter
from numi.providers.base import ProviderAdapter
from numi.testing import ScriptedProvider

# Retries stay on (they are part of what is tested) but never sleep noticeably.
FAST_RETRY = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)


@pytest.fixture(scope="session")
def _server() -> Iterable[ScriptedProvider]:
    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def scripted(_server: ScriptedProvider) -> Iterable[ScriptedProvider]:
    _server.reset()
    _server.api_key = None
    yield _server
    _server.release()  # let any stalled handler thread finish


def base_url_for(kind: str, server: ScriptedProvider) -> str:
    return server.anthropic_base_url if kind == "anthropic" else server.openai_base_url


@pytest.fixture
def make_adapter(scripted: ScriptedProvider) -> Callable[..., ProviderAdapter]:
    adapters: list[ProviderAdapter] = []

    def make(
        kind: str, *, api_key: str | None = "test-key", base_url: str | None = None, **options: Any
    ) -> ProviderAdapter:
        options.setdefault("retry", FAST_RETRY)
        options.setdefault("timeout", 10.0)
        adapter = get_adapter(kind, base_url or base_url_for(kind, scripted), api_key, **options)
        adapters.append(adapter)
        return adapter

    yield make
    for adapter in adapters:
        adapter.close()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def adapter(kind: str, make_adapter: Callable[..., ProviderAdapter]) -> ProviderAdapter:
    return make_adapter(kind)
