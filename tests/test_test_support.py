"""The shared test helpers behave as their docstrings promise (a helper that skips
silently in CI would hide failures)."""

from __future__ import annotations

import pytest
from fixtures.live_server import LiveServer


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


def test_a_server_wait_ends_on_readiness_or_exit_and_its_deadline_only_catches_a_hang(tmp_path):
    """Issue 36: LiveServer.start waited a fixed 30 s for /healthz, and 113 tests failed
    there on a loaded machine. A wait ends when the server is ready or its process exits;
    its deadline is far beyond a slow start."""
    import inspect
    import subprocess
    import sys

    from server_wait import HANG_SECONDS, wait_until_ready

    assert HANG_SECONDS >= 180
    assert inspect.signature(LiveServer.start).parameters["timeout"].default >= 180
    ready_file = tmp_path / "ready"
    waiting = subprocess.Popen(
        [sys.executable, "-c", f"open({str(ready_file)!r}, 'w').close(); input()"],
        stdin=subprocess.PIPE,
    )
    try:
        wait_until_ready(waiting, ready_file.exists, what="the child")
        with pytest.raises(RuntimeError, match=r"a hang\?"):
            wait_until_ready(waiting, lambda: False, what="the child", deadline=0.2)
    finally:
        waiting.communicate(b"\n", timeout=30)
    failing = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(RuntimeError, match="the child exited with 3:\nwhy"):
        wait_until_ready(failing, lambda: False, what="the child", log=lambda: "why")
