"""Waiting for a server a test started: until it is ready or its process has exited, with
a deadline that only a hang reaches.

A fixed 30 s wait for `/healthz` failed 113 tests on a machine at load average 23 to 33
(issue 36), each of which passed alone: a loaded machine makes a start slow, and slow is
not broken. What is broken shows as the process exiting (its log says why) or as a hang.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable

# Far beyond any start on a loaded machine; reached only when something hangs.
HANG_SECONDS = 180.0
# How long a test waits for a state it caused (an event on a socket, an element on a page, a
# row): what passes returns as soon as the state is there, so this only decides how long a
# broken test takes to say so. 10 or 15 s failed tests that were only slow at load average
# 25 (issue 36); a minute is well under pytest-timeout's five, so the failure names what it
# waited for.
WAIT_SECONDS = 60.0


def wait_until_ready(
    proc: subprocess.Popen,
    ready: Callable[[], bool],
    *,
    what: str,
    log: Callable[[], str] = lambda: "",
    deadline: float = HANG_SECONDS,
) -> None:
    """Poll `ready()` (an OSError counts as not yet) until it is true. Raises RuntimeError
    with `log()` when `proc` exits first, or when `deadline` seconds pass (a hang)."""
    give_up = time.monotonic() + deadline
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log()}")
        try:
            if ready():
                return
        except OSError:  # refused, reset or timed out: not listening yet
            pass
        if time.monotonic() > give_up:
            raise RuntimeError(f"{what} was not ready after {deadline:.0f} s (a hang?):\n{log()}")
        time.sleep(0.05)


def answers_healthz(url: str) -> Callable[[], bool]:
    """A readiness check: `url`/healthz answers 200."""

    def ready() -> bool:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
            return response.status == 200

    return ready
