"""CPU work has a pool of its own (issue 34): markdown renders no longer take the threads of
gevent's pool, which also resolves host names, so a burst of renders never queues another
user's DNS look-up (and with it their turn) behind them. Order, not seconds: the look-up
started after the renders is answered before the first of them ends.

A module imported in the CPU pool is waited for whole by every greenlet that asks while its
import is under way (issue 36): two turns on a fresh process, one importing the provider SDK
in the pool, the other waiting on that module's import lock, hung for good in about one run
in four of tests/tasks/test_tasks_two_processes.py under load."""

from __future__ import annotations

import sys
import threading
import types
import uuid

import gevent
import gevent.socket

import pytest

from numi.cpu_pool import (
    CPU_THREADS,
    busy_jobs,
    hub_pool_if_made,
    import_off_hub,
    pool_state,
    run_cpu,
)
from numi.web.live.message_render import OFF_HUB_CHARS, render_html
from server_wait import WAIT_SECONDS

PARAGRAPH = "Some **bold** text with `code` and *emphasis*.\n\n- item one\n- item _two_\n\n"
# Past the off-hub threshold: each render is handed to a pool thread.
LONG = (PARAGRAPH * (2 * OFF_HUB_CHARS // len(PARAGRAPH) + 1))[: 2 * OFF_HUB_CHARS]
# More renders than gevent's pool has threads (10), as in the review's twelve requests.
RENDERS = 12


def test_a_dns_look_up_is_not_queued_behind_markdown_renders():
    finished: list[str] = []
    started = []

    def render(n: int):
        started.append(n)
        html = render_html(f"{LONG}\n\nanswer {n}", None, cap=10 * len(LONG))
        assert "<strong>bold</strong>" in html
        finished.append("render")

    def look_up():
        # What a provider request or a fetched page does first (gevent's thread resolver).
        assert gevent.socket.getaddrinfo("localhost", 80)
        finished.append("dns")

    renders = [gevent.spawn(render, n) for n in range(RENDERS)]
    while len(started) < RENDERS:  # every render has been handed to a pool
        gevent.sleep(0)
    dns = gevent.spawn(look_up)
    gevent.joinall([*renders, dns], raise_error=True, timeout=120)
    assert len(finished) == RENDERS + 1, finished
    assert finished.index("dns") == 0, f"the look-up waited for renders: {finished}"


def test_every_greenlet_gets_the_module_whole_while_its_import_runs_in_the_pool(tmp_path):
    name = f"slow_sdk_{uuid.uuid4().hex[:8]}"
    gate = types.SimpleNamespace(started=threading.Event(), finish=threading.Event())
    sys.modules[f"{name}_gate"] = gate  # type: ignore[assignment]
    (tmp_path / f"{name}.py").write_text(
        f"import {name}_gate as gate\n"
        "gate.started.set()\n"
        f"gate.finish.wait({WAIT_SECONDS})\n"
        "READY = True  # the module's last line: whole once this is set\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:

        def turn() -> bool:
            import_off_hub(name)
            return sys.modules[name].READY

        first = gevent.spawn(turn)
        while not gate.started.is_set():  # the pool's thread is inside the import
            gevent.sleep(0.005)
        assert name in sys.modules  # half imported: what the later turns used to find
        later = [gevent.spawn(turn) for _ in range(2)]
        gevent.sleep(0)
        gevent.sleep(0)
        # They wait for the import; before, they returned at once and read a half module.
        assert not any(greenlet.ready() for greenlet in [first, *later])
        gate.finish.set()
        gevent.joinall([first, *later], timeout=WAIT_SECONDS, raise_error=True)
        assert [greenlet.value for greenlet in [first, *later]] == [True, True, True]
        import_off_hub(name)  # done: returns at once
    finally:
        gate.finish.set()
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
        sys.modules.pop(f"{name}_gate", None)


def test_a_busy_pool_says_what_it_runs_and_where():
    """What a timed-out wait prints (an index's, a turn's): the job its waiters queue behind,
    for how long and at which line, found from the pool thread's own frames."""
    gate = threading.Event()  # a native Event (the test worker is not monkey-patched)

    def stuck_job():
        gate.wait(WAIT_SECONDS)

    job = gevent.spawn(run_cpu, stuck_job)
    while not busy_jobs():
        gevent.sleep(0.005)
    (busy,) = busy_jobs()
    # Threads are made on demand and kept: how many there are depends on the tests before.
    assert pool_state().startswith("1 task(s) unfinished, "), pool_state()
    assert f" of {CPU_THREADS} thread(s)" in pool_state(), pool_state()
    assert busy.startswith(
        "test_a_busy_pool_says_what_it_runs_and_where.<locals>.stuck_job for "
    ), busy
    assert "test_cpu_pool.py:" in busy, busy
    gate.set()
    job.get(timeout=WAIT_SECONDS)
    assert busy_jobs() == []
    assert pool_state().startswith("0 task(s) unfinished, "), pool_state()


@pytest.mark.loses_wake_ups
def test_a_result_whose_wake_up_never_comes_is_fetched_by_its_waiter():
    """The fault seen in CI (issue 36): a job finished in its thread, and its wake-up never
    reached the hub. The pool's wake-ups are stopped here to make it happen: each waiter
    still gets its value or its exception, within twice `LOST_WAKE_UP_CHECK`, and it is counted."""
    run_cpu(len, "")  # the pool exists
    pool = hub_pool_if_made()
    before = pool.lost_wake_ups
    pool._wake.stop()
    try:
        assert gevent.spawn(run_cpu, sum, [20, 22]).get(timeout=WAIT_SECONDS) == 42
        with pytest.raises(ZeroDivisionError):
            gevent.spawn(run_cpu, divmod, 1, 0).get(timeout=WAIT_SECONDS)
    finally:
        pool._wake.start(pool._deliver)
    assert pool.lost_wake_ups == before + 2
    assert run_cpu(sum, [1, 2]) == 3, "with its wake-ups back, as before"
    assert pool.lost_wake_ups == before + 2
