"""Keep the server's own memory and environment out of reach of the commands it runs.

`bash` runs as the same user as the server. Its environment is already scrubbed, but on
Linux any same-user process can read `/proc/<server pid>/environ` (the server's start-up
environment: NUMI_SECRET_KEY, NUMI_ACCESS_TOKEN, provider keys) and `/proc/<pid>/mem`,
and with the secret key it can decrypt the endpoint keys stored in the database. So:

- `make_undumpable()` sets PR_SET_DUMPABLE to 0 on the server process at start. The kernel
  then lets only a process with CAP_SYS_PTRACE open the server's environ, mem, maps or
  attach to it; a same-user process gets EACCES. The flag survives fork (gunicorn workers)
  and is reset by execve, so the commands we start are ordinary processes.
- `drop_ptrace_capability()` runs in each command's child before exec: when the server
  runs as root, the child would otherwise have CAP_SYS_PTRACE and pass that check. It
  removes the capabilities that read other processes' or the kernel's memory (and
  CAP_SYS_ADMIN, which also passes the check) from the
  child's bounding set, so neither bash nor anything it execs can hold them again.

Output masking in the bash tool stays as a second line for secrets a command can still
read (a secret file in the data directory, say).
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
# Each of CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE alone still opens a
# non-dumpable process's environ (measured on Linux 6.x); CAP_SYS_MODULE (load a module
# that reads anything) and CAP_SYS_RAWIO (/dev/mem, /proc/kcore) go round it.
DROPPED_CAPABILITIES = (16, 17, 19, 21, 38)


def _prctl(option: int, arg: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(
        option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )


def make_undumpable() -> bool:
    """Make this process's /proc files (environ, mem) unreadable to other same-user
    processes. Linux only; returns whether the flag was set."""
    if not sys.platform.startswith("linux"):
        return False
    if _prctl(PR_SET_DUMPABLE, 0) != 0:
        log.warning("could not make the server undumpable: errno %s", ctypes.get_errno())
        return False
    return True


def drop_ptrace_capability() -> None:
    """In a child before exec: remove CAP_SYS_PTRACE and friends from the bounding set.
    Without CAP_SETPCAP (not root) the child never had them; EPERM is then harmless."""
    if not sys.platform.startswith("linux"):
        return
    for capability in DROPPED_CAPABILITIES:
        _prctl(PR_CAPBSET_DROP, capability)
