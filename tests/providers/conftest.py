"""Fixtures for provider tests: one scripted provider server for the whole session
(reset before each test) and real adapters pointed at it through the real SDKs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from provider_test_support import KINDS

from numi.providers import RetryPolicy, get_adapter
from numi.providers.base import ProviderAdapter
from numi.testing import ScriptedProvider
from server_wait import WAIT_SECONDS

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
    """`make_adapter(kind, **options)`: a real adapter on the scripted provider, closed
    after the test once the threads the test started have ended.

    Closed under a thread still streaming, an adapter's call fails, is retried (retries
    are on) on a client made anew, and asks the provider during a later test, taking the
    answer that test queued: test_wait_for_the_nth_request's thread did so (issue 36)."""
    adapters: list[ProviderAdapter] = []
    before = set(threading.enumerate())

    def make(
        kind: str, *, api_key: str | None = "test-key", base_url: str | None = None, **options: Any
    ) -> ProviderAdapter:
        options.setdefault("retry", FAST_RETRY)
        options.setdefault("timeout", 10.0)
        adapter = get_adapter(kind, base_url or base_url_for(kind, scripted), api_key, **options)
        adapters.append(adapter)
        return adapter

    yield make
    # Daemon threads are servers' (the scripted provider's handlers, a test's own server).
    started = [t for t in threading.enumerate() if t not in before and not t.daemon]
    for thread in started:
        thread.join(WAIT_SECONDS)
    for adapter in adapters:
        adapter.close()
    hung = [thread.name for thread in started if thread.is_alive()]
    assert not hung, f"threads the test started still run (a hang?): {hung}"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def adapter(kind: str, make_adapter: Callable[..., ProviderAdapter]) -> ProviderAdapter:
    return make_adapter(kind)
