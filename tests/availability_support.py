"""Measuring what an attack costs everyone else: another client's request, timed while the
attack runs, against the same request timed in the same run without it (issue 28). The
numbers are relative within one run, never absolute timing targets."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable


def request_seconds(url: str, headers: dict[str, str] | None = None) -> float:
    """Seconds one GET of `url` takes, body read."""
    start = time.perf_counter()
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=headers or {}), timeout=120
    ) as response:
        response.read()
    return time.perf_counter() - start


def slowest_during(
    attack: Callable[[], object], url: str, headers: dict[str, str] | None = None
) -> tuple[float, object]:
    """The slowest of back-to-back GETs of `url` while `attack()` runs in a thread (at least
    one GET after it has started and one overlapping its end), and what `attack` returned."""
    result: dict[str, object] = {}
    started = threading.Event()

    def run():
        started.set()
        try:
            result["value"] = attack()
        except Exception as exc:  # noqa: BLE001 - re-raised in the test's thread below
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait()
    slowest = 0.0
    while True:
        slowest = max(slowest, request_seconds(url, headers))
        if not thread.is_alive():
            break
    thread.join()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return slowest, result.get("value")
