"""What a Python kernel's process may do: set up in the child between fork and exec.

- Memory: RLIMIT_AS caps the kernel's address space (NUMI_CODE_MEMORY_MB), so a memory
  bomb raises MemoryError inside the kernel instead of taking the machine.
- Network: unless NUMI_CODE_NETWORK is on, the child enters a new user namespace (mapped to
  its own uid, no privilege gained) and a new network namespace with no interface up: code
  gets "Network is unreachable". The kernel talks to Numi over Unix sockets (ZeroMQ `ipc`),
  which a network namespace does not cut. Where the OS refuses user namespaces
  (`network_isolation()` says so once per process), the kernel runs with the network and
  the README says where that happens.
- The server's /proc stays closed, as for bash (numi/process_guard.py): capabilities that
  read other processes' memory are dropped from the bounding set.

Everything here runs in the forked child before exec: only async-signal-safe-ish system
calls through ctypes, no locks, no logging.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
from functools import lru_cache

from ....process_guard import drop_ptrace_capability

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def _unshare_network() -> bool:
    """In the child: a user namespace mapping our own ids, then a network namespace."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return False
    try:
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"{gid} {gid} 1")
    except OSError:
        return False
    return True


def child_setup(memory_bytes: int, isolate_network: bool):
    """The `preexec_fn` of a kernel's Popen."""

    def setup() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if isolate_network and not _unshare_network():
            os._exit(71)  # the parent checked that this works: failing now must not run open
        drop_ptrace_capability()

    return setup


@lru_cache(maxsize=1)
def network_isolation() -> bool:
    """Whether this machine lets an unprivileged child take its own network namespace
    (checked once, by a Python child that tries)."""
    if not sys.platform.startswith("linux"):
        return False
    probe = (
        "import ctypes,os,sys;"
        f"sys.exit(0 if ctypes.CDLL(None).unshare({CLONE_NEWUSER | CLONE_NEWNET}) == 0 else 1)"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
