"""The shared test helpers behave as their docstrings promise (a helper that skips
silently in CI would hide failures)."""

from __future__ import annotations

import pytest


def test_a_missing_extra_skips_locally_and_fails_in_ci(require_extra, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_extra("numi_no_such_module", "nothing")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"numi\[nothing\]"):
        require_extra("numi_no_such_module", "nothing")
    assert require_extra("json", "none").dumps([]) == "[]"


def test_wait_until_returns_the_value_or_fails_naming_what(until):
    values = iter([0, None, "ready"])
    assert until(lambda: next(values), timeout=5) == "ready"
    with pytest.raises(AssertionError, match="the impossible"):
        until(lambda: False, timeout=0.05, what="the impossible")
