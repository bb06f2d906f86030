"""numi/cpu_pool.py: a module imported in the CPU pool is waited for whole by every greenlet
that asks for it while its import is under way (issue 36: two turns on a fresh process, one
importing the provider SDK in the pool, the other waiting on that module's import lock, hung
for good in about one run in four of tests/tasks/test_tasks_two_processes.py under load)."""

from __future__ import annotations

import sys
import threading
import types
import uuid

import gevent

from numi.cpu_pool import import_off_hub
from server_wait import WAIT_SECONDS


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
