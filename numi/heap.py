"""Memory a serving process gives back once its turns have ended (issue 45).

500 streams at once grow the heap by some 50 MiB, and ending them gave little of it back
(RSS stayed 40 MiB above its start, bench/PROFILE.md). Two things kept it:

- the ended turns' cyclic garbage (an agent and its context window refer to each other, a
  turn and its greenlet): with start-up's objects frozen and the young generation collected
  every 10,000 objects (`settle_heap_for_serving` in numi/__init__.py, chosen for the hub's
  sake under load), the full collection that frees them may not come for minutes;
- free memory glibc keeps in its heap instead of returning it: `malloc_trim(0)` returns
  the free pages (14 MiB after 500 streams).

So when the process's last running turn ends, `HeapRelease` waits until the work that
follows it is done and the process stays idle, then collects and trims once, at most once
per `interval` (10 s). The collection runs on the hub (a thread would hold the GIL as
long), and only when no turn streams: after 500 streams it freed 47,000 objects in 148 ms
at load average 7, after one turn 1,200 in 42 ms. The trim runs in the CPU pool (ctypes
lets go of the GIL): 1-6 ms.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent

from .cpu_pool import run_cpu

log = logging.getLogger(__name__)

# glibc's; None on a C library without it (musl, macOS), where only the collection runs.
_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)


@dataclass(frozen=True)
class Released:
    """What one release did: objects the collection freed and the time each step took."""

    collected: int
    collect_ms: float
    trim_ms: float


def _trim() -> float:
    started = time.perf_counter()
    if _malloc_trim is not None:
        _malloc_trim(0)
    return (time.perf_counter() - started) * 1000


def release() -> Released:
    """Collect the cyclic garbage, then hand glibc's free pages back to the system."""
    started = time.perf_counter()
    collected = gc.collect()
    collect_ms = (time.perf_counter() - started) * 1000
    return Released(collected, collect_ms, run_cpu(_trim))


class HeapRelease:
    """One release after the process's turns have ended (see the module's docstring).

    `running` says whether a turn runs (then its end asks again), `settling` whether the
    work that follows ended turns (saves' hooks, titles) still runs (then it waits)."""

    def __init__(
        self,
        running: Callable[[], bool],
        settling: Callable[[], bool],
        *,
        delay: float = 1.0,
        interval: float = 10.0,
    ):
        self.running = running
        self.settling = settling
        self.delay = delay
        self.interval = interval
        self.released_at = float("-inf")
        self.last: Released | None = None
        self._waiting: gevent.Greenlet | None = None

    def turns_ended(self) -> None:
        """The process's last running turn has ended: release once it has settled."""
        if self._waiting is None or self._waiting.dead:
            self._waiting = gevent.spawn(self._release_when_idle)

    def _release_when_idle(self) -> None:
        while True:
            gevent.sleep(max(self.delay, self.released_at + self.interval - time.monotonic()))
            if self.running():
                return
            if not self.settling():
                break
        self.last = release()
        self.released_at = time.monotonic()
        log.debug("heap released after the turns ended: %s", self.last)

    def stop(self) -> None:
        """No release after this (an app that ends in a process that goes on)."""
        if self._waiting is not None:
            self._waiting.kill(block=False)
