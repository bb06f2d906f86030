"""A child process that reads untrusted input with bounds of its own, without holding the hub.

PDF extraction (numi/chat/pdf_extract.py) and an import's reading
(numi/web/import_worker.py) run as `python -m <module>` children: an address-space limit
(RLIMIT_AS) and a CPU limit bound what a hostile file can cost, the environment carries
none of the server's secrets, and the parent talks to them through gevent.subprocess pipes.
"""

from __future__ import annotations

import os
import resource
import signal
import sys


def start(module: str, args: list[str], *, memory_bytes: int, cpu_seconds: int, stdin=None):
    """`python -m module *args` with stdin and stdout pipes, in a session of its own (so
    `stop` takes its whole group), within `memory_bytes` and `cpu_seconds`. `stdin`, when
    given, is an open file the child reads instead of a pipe."""
    from gevent import subprocess  # lazy: start-up time

    def bound_child() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))

    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=bound_child,
        start_new_session=True,
        env=child_env(),
    )


def stop(process) -> None:
    """Kill the child's process group if it still runs, and reap it."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def child_env() -> dict[str, str]:
    """The environment of a child process that reads untrusted input: enough to import numi."""
    keep = ("PATH", "PYTHONPATH", "LANG", "HOME", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k in keep or k.startswith("LC_")}
