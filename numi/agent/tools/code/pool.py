"""`KernelPool` (one per app, `Services.kernels`): this process's Python kernels by chat, at
most NUMI_CODE_MAX_KERNELS per user, each shut down after NUMI_CODE_IDLE_MINUTES unused (a
reaper greenlet runs only while kernels do). It is made with the app; the kernels' own code
(`kernels.py`: the Jupyter protocol, the sandbox) is loaded by the first `run_python` call.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import gevent
from gevent.lock import BoundedSemaphore

if TYPE_CHECKING:
    from .kernels import Kernel

log = logging.getLogger(__name__)


class KernelPool:
    """This process's kernels by chat id, with their per-user maximum and idle shutdown."""

    def __init__(self) -> None:
        self.kernels: dict[str, Kernel] = {}
        self.starting: dict[str, BoundedSemaphore] = {}
        # Why a chat's last kernel ended (idle, restart, died), for the next call's notice.
        self.ended: dict[str, str] = {}
        self._reaper: gevent.Greenlet | None = None

    def get(self, chat_id: str) -> Kernel | None:
        kernel = self.kernels.get(chat_id)
        if kernel is not None and not kernel.alive:
            self.discard(chat_id, "died")
            return None
        return kernel

    def count(self, user_id: int) -> int:
        return sum(1 for k in self.kernels.values() if k.user_id == user_id and k.alive)

    def starting_lock(self, chat_id: str) -> BoundedSemaphore:
        """Held while a chat's kernel starts: two calls at once start one kernel."""
        return self.starting.setdefault(chat_id, BoundedSemaphore())

    def add(self, kernel: Kernel, idle_seconds: float) -> None:
        self.kernels[kernel.chat_id] = kernel
        self.ended.pop(kernel.chat_id, None)
        if self._reaper is None or self._reaper.dead:
            self._reaper = gevent.spawn(self._reap, idle_seconds)

    def discard(self, chat_id: str, reason: str) -> bool:
        """Shut the chat's kernel down (if any); `reason` is told to its next call."""
        kernel = self.kernels.pop(chat_id, None)
        if kernel is None:
            return False
        self.ended[chat_id] = reason
        kernel.close()
        return True

    def shutdown(self) -> None:
        """Every kernel of this process, at exit."""
        for chat_id in list(self.kernels):
            self.discard(chat_id, "restart")

    def _reap(self, idle_seconds: float) -> None:
        # Runs only while kernels exist: an idle Numi keeps no greenlet for them.
        while self.kernels:
            gevent.sleep(max(1.0, min(idle_seconds / 4, 30.0)))
            now = time.monotonic()
            for chat_id, kernel in list(self.kernels.items()):
                if not kernel.alive:
                    self.discard(chat_id, "died")
                elif not kernel.lock.locked() and now - kernel.last_used >= idle_seconds:
                    log.info("python kernel of chat %s idle: shut down", chat_id)
                    self.discard(chat_id, "idle")
