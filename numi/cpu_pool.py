"""OS threads for CPU work (markdown renders, compression, HTML parsing, image scaling), apart
from gevent's own threadpool.

gevent's hub threadpool also resolves host names: its resolver runs `getaddrinfo` there, so
every provider request and every fetched page goes through it. When CPU jobs shared it, twelve
renders of one huge message took its ten threads, and another user's turn waited for them
behind its DNS look-up (0.05 s became 31 s: issue 34). CPU jobs therefore run here instead:
`CPU_THREADS` threads (half the cores, so the hub's thread always keeps one), and the calling
greenlet waits while the hub runs on. A job still holds the GIL while it runs Python, so the
pool also shortens the interpreter's switch interval (the most the hub's thread waits for
the GIL once it asks) from 5 ms to `CPU_SWITCH_INTERVAL`.

A pool is driven by the hub that made it, so there is one per hub (per OS thread), as gevent
keeps its own; `hub_pool` makes gevent's pools for the password hashing lanes
(numi/passwords.py) and the Markdown mirror's files.

The CPU pool is not gevent's ThreadPool, for one reason: in the test suite a job's result
seemed sometimes never to reach the hub that waited for it (six sightings in CI runs, issue
36). Here a finished job is put on a list the hub drains when the pool's async watcher
wakes it, and a waiter also looks every `LOST_WAKE_UP_CHECK` seconds whether its job
finished without that wake-up: finished at two looks in a row, it takes the result itself
and says so in the log. There are no slots to lose: jobs queue without bound and each
thread takes the next. The sightings went on with this pool, and the later ones, reported
more closely, were no lost result at all: the test's wait for the jobs had ended early
(numi/knowledge/index.py, `wait_for_indexing`; README, Development). The look for a lost
wake-up stays: one timer per wait.
"""

from __future__ import annotations

import collections
import importlib
import logging
import os
import sys
import time
from _queue import SimpleQueue  # the C queue: a real thread blocks in get(), never patched
from pathlib import Path
from typing import Any, Callable

import gevent
from gevent.event import AsyncResult
from gevent.monkey import get_original

log = logging.getLogger(__name__)

# The real thread's id (the patched `threading.get_ident` names a greenlet): the key of
# `sys._current_frames`.
_thread_ident = get_original("_thread", "get_ident")
_start_thread = get_original("_thread", "start_new_thread")

# Half the cores: CPU jobs never take every core from the hub that serves the streams.
CPU_THREADS = max(1, (os.cpu_count() or 2) // 2)
# No lowered priority, unlike the password hashes (argon2 releases the GIL; a render holds
# it): a niced thread that the OS leaves waiting while it holds the GIL keeps the hub waiting
# too. bench/fairness.py on a loaded machine: nice 10 put another user's turn at 2.1x its
# idle p95 and took 32 s for the 12 renders; normal priority 1.5x and 13 s.
CPU_SWITCH_INTERVAL = 0.001
_POOL = "numi_cpu_pool"
# How often a waiting greenlet looks whether its job finished without waking the hub; a lost
# wake-up costs at most twice this. Cheap: one timer per wait and this interval.
LOST_WAKE_UP_CHECK = 0.2


def run_cpu(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` in this hub's CPU pool; the calling greenlet waits for
    the result (or the exception), the hub keeps serving everyone else."""
    pool = getattr(gevent.get_hub(), _POOL, None)
    if pool is None:
        # Process-wide, once: while a CPU job holds the GIL, the hub's thread gets it back
        # within this time of asking, rather than the default 5 ms. bench/fairness.py: another
        # user's turn during 12 renders of 198,000 characters went from 3.5x its idle p95
        # to 1.3-1.7x; without contention the interval changes nothing.
        sys.setswitchinterval(CPU_SWITCH_INTERVAL)
        pool = CpuPool(CPU_THREADS)
        setattr(gevent.get_hub(), _POOL, pool)
    return pool.apply(function, args, kwargs)


class _Job:
    """One call handed to a pool thread, and what it gave."""

    __slots__ = ("function", "args", "kwargs", "result", "finished", "value", "error")

    def __init__(self, function: Callable[..., Any], args: tuple, kwargs: dict):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.result = AsyncResult()  # set in the hub's thread only
        self.finished = False  # set by the pool thread once `value` or `error` is
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """In a pool thread."""
        try:
            self.value = _running(self.function, self.args, self.kwargs)
        except BaseException as exc:  # the waiter re-raises it
            self.error = exc
        self.function = self.args = self.kwargs = None  # type: ignore[assignment]
        self.finished = True

    def deliver(self) -> None:
        """In the hub's thread: the waiting greenlet gets the value or the exception."""
        if self.result.ready():
            return
        if self.error is not None:
            error, self.error = self.error, None
            self.result.set_exception(error, (type(error), error, error.__traceback__))
        else:
            self.result.set(self.value)
        self.value = None


class CpuPool:
    """`threads` OS threads running the CPU jobs of the hub that made the pool."""

    def __init__(self, threads: int):
        self.hub = gevent.get_hub()
        self.threads = threads
        self.lost_wake_ups = 0  # jobs whose result the waiter had to fetch itself
        self._queue: SimpleQueue = SimpleQueue()
        self._finished: collections.deque[_Job] = collections.deque()  # appended by threads
        self._pending: set[_Job] = set()  # queued or running (the hub's thread only)
        self._wake = self.hub.loop.async_()
        # Not a reason for the loop to run on: a waiter always has its timer.
        self._wake.ref = False
        self._wake.start(self._deliver)
        for _ in range(threads):
            _start_thread(self._work, ())

    def __len__(self) -> int:
        """Jobs queued or running (a killed waiter's job too, until it ends)."""
        return sum(1 for job in self._pending if not job.finished)

    def apply(self, function: Callable[..., Any], args: tuple = (), kwargs: dict | None = None):
        """`function(*args, **kwargs)` in a pool thread; the calling greenlet waits."""
        job = _Job(function, args, kwargs or {})
        self._pending.add(job)  # until delivered, even if this greenlet is killed meanwhile
        self._queue.put(job)
        finished_unwoken = False
        while True:
            try:
                return job.result.get(timeout=LOST_WAKE_UP_CHECK)
            except gevent.Timeout:
                if not job.finished:
                    continue
                # Finished at two looks in a row and still not delivered: its wake-up is
                # lost, not on its way (the thread marks a job finished just before it
                # sends the wake-up).
                if finished_unwoken:
                    self.lost_wake_ups += 1
                    log.warning(
                        "a CPU job's result did not wake the hub: taken by its waiter"
                        " (%d so far in this process)",
                        self.lost_wake_ups,
                    )
                    self._hand_back(job)
                finished_unwoken = True

    def _work(self) -> None:
        """A pool thread: run jobs as they come, hand each back to the hub."""
        while True:
            job = self._queue.get()
            job.run()
            self._finished.append(job)
            self._wake.send()

    def _deliver(self) -> None:
        while self._finished:
            self._hand_back(self._finished.popleft())

    def _hand_back(self, job: _Job) -> None:
        """In the hub's thread: the job's waiter, if it still waits, gets what it gave."""
        job.deliver()
        self._pending.discard(job)


# What each pool thread runs now, by its thread id: (the job's function, when it started).
# Named only when asked (busy_jobs): a job pays a dict entry, not a repr.
_RUNNING: dict[int, tuple[Callable[..., Any], float]] = {}


def _running(function: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """`function(*args, **kwargs)`, recorded as running in this pool thread while it runs."""
    ident = _thread_ident()
    _RUNNING[ident] = (function, time.monotonic())
    try:
        return function(*args, **kwargs)
    finally:
        _RUNNING.pop(ident, None)


def busy_jobs() -> list[str]:
    """What the CPU pools' threads run now, for a wait that timed out: each job's name, for
    how long, and where it is (its innermost frames). A job a waiter queues behind is named
    here, so "still waiting after 60 s" says on what."""
    frames = sys._current_frames()
    now, busy = time.monotonic(), []
    for ident, (function, started) in list(_RUNNING.items()):
        name = getattr(function, "__qualname__", None) or repr(function)
        frame, where = frames.get(ident), []
        while frame is not None and len(where) < 4:
            where.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}")
            frame = frame.f_back
        busy.append(f"{name} for {now - started:.1f} s at {' < '.join(where) or '?'}")
    return busy


def hub_pool_if_made(hub=None):
    """This hub's (or `hub`'s) CPU pool, or None before its first job. (`is None`, not `or`:
    a hub is a greenlet, false until its loop first runs.)"""
    return getattr(gevent.get_hub() if hub is None else hub, _POOL, None)


def pool_state(hub=None) -> str:
    """This hub's (or `hub`'s) CPU pool as counts: jobs queued or running, its threads, and
    how many results a waiter had to fetch itself because their wake-up never came."""
    pool = hub_pool_if_made(hub)
    if pool is None:
        return "no CPU pool yet"
    undelivered = len(pool._pending) - len(pool)
    loop = pool.hub.loop
    return (
        f"{len(pool)} task(s) unfinished, {pool.threads} of {pool.threads} thread(s),"
        f" {pool.lost_wake_ups} lost wake-up(s), {undelivered} finished and not handed back"
        f" ({len(pool._finished)} of them not yet seen by the hub); the hub's loop:"
        f" iteration {loop.iteration}, {loop.activecnt} active and {loop.pendingcnt} pending"
        f" watcher(s), now {loop.now():.3f} against the clock's {time.time():.3f}"
    )


def hub_pool(name: str, threads: int):
    """The gevent ThreadPool called `name` of the current hub, made with `threads` threads
    the first time it is asked for (for work that is not the CPU pool's: the password
    hashing lanes, niced, and the Markdown mirror's file writes)."""
    from gevent.threadpool import ThreadPool  # lazy: start-up time

    hub = gevent.get_hub()
    pool = getattr(hub, name, None)
    if pool is None:
        pool = ThreadPool(threads, hub=hub)
        setattr(hub, name, pool)
    return pool


# Imports under way or done in the pool, by module: every greenlet that needs one waits on
# the one import's pool result, never on the import lock of a module a native thread is
# importing. Two turns started at once on a fresh process (a scheduler's round, turns resumed
# after a restart) hung there for good: the second found the provider SDK in sys.modules,
# half imported, and waited on its lock, and the thread's release of that gevent lock did not
# always wake it (tests/tasks/test_tasks_two_processes.py, about one run in four under load).
_IMPORTS: dict[str, gevent.Greenlet] = {}


def import_off_hub(module: str) -> None:
    """Import `module` in the CPU pool once; each caller waits until it is imported whole.
    A failed import raises to its waiters and is tried again by the next call."""
    importing = _IMPORTS.get(module)
    if importing is None:
        if module in sys.modules:
            return  # imported by other means (start-up, a plugin): complete
        importing = _IMPORTS[module] = gevent.spawn(run_cpu, importlib.import_module, module)
    try:
        importing.get()
    finally:
        if importing.ready() and not importing.successful():
            _IMPORTS.pop(module, None)
