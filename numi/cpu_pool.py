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
keeps its own; `hub_pool` also makes the password hashing lanes (numi/passwords.py).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import gevent
from gevent.monkey import get_original

# The real thread's id (the patched `threading.get_ident` names a greenlet): the key of
# `sys._current_frames`.
_thread_ident = get_original("_thread", "get_ident")

# Half the cores: CPU jobs never take every core from the hub that serves the streams.
CPU_THREADS = max(1, (os.cpu_count() or 2) // 2)
# No lowered priority, unlike the password hashes (argon2 releases the GIL; a render holds
# it): a niced thread that the OS leaves waiting while it holds the GIL keeps the hub waiting
# too. bench/fairness.py on a loaded machine: nice 10 put another user's turn at 2.1x its
# idle p95 and took 32 s for the 12 renders; normal priority 1.5x and 13 s.
CPU_SWITCH_INTERVAL = 0.001
_POOL = "numi_cpu_pool"


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
        pool = hub_pool(_POOL, CPU_THREADS)
    return pool.apply(_running, (function, args, kwargs))


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


def hub_pool_if_made():
    """This hub's CPU pool, or None before its first job."""
    return getattr(gevent.get_hub(), _POOL, None)


def pool_state() -> str:
    """This hub's CPU pool as counts: with no job running, whether tasks wait for a thread,
    the threads are gone, or the slots were never given back."""
    pool = hub_pool_if_made()
    if pool is None:
        return "no CPU pool yet"
    return (
        f"{len(pool)} task(s) unfinished, {pool.size} of {pool.maxsize} thread(s),"
        f" {pool._available_worker_threads_greenlet_sem.counter} free slot(s)"
    )


def hub_pool(name: str, threads: int):
    """The gevent ThreadPool called `name` of the current hub, made with `threads` threads
    the first time it is asked for."""
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
