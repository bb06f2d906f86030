"""The scheduler: a greenlet in each serving process that runs scheduled tasks when due.

Each process (`numi serve`, each gunicorn worker) runs one when NUMI_TASK_SCHEDULER is on;
how many look at once does not matter, since a due time is claimed once
(numi.tasks.runs.claim_due). It sleeps until its earliest due time or
NUMI_TASK_POLL_SECONDS (to see tasks that other processes added), and a task saved here
wakes it. Time comes from `clock`, which tests replace: they call `tick()` at the moment
they choose and never sleep.

It also ends runs whose turn died with its process (killed, or stopped past its grace):
once the chat has no running turn, the run is recorded from what its turn saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import gevent
import gevent.event
from sqlalchemy import func, select

from ..extensions import db, turn_manager
from ..models import Task, TaskRun, utcnow
from .runs import claim_due, record_answer, start_run

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)

# A run still "running" this long after it started, whose chat runs no turn, lost its turn.
ORPHAN_AFTER = timedelta(minutes=2)


class TaskScheduler:
    """One per app (`Services.task_scheduler`): the clock and the greenlet."""

    def __init__(self, app: Flask, clock: Callable[[], datetime] = utcnow):
        self.app = app
        self.clock = clock
        self.greenlet: gevent.Greenlet | None = None
        self._wake = gevent.event.Event()

    def now(self) -> datetime:
        """The scheduler's time (naive UTC): what due times are compared with."""
        return self.clock()

    def start(self) -> None:
        """Run due tasks from now on in this process (when NUMI_TASK_SCHEDULER is on)."""
        if self.greenlet is None and self.app.config["NUMI_TASK_SCHEDULER"]:
            self.greenlet = gevent.spawn(self._loop)

    def poke(self) -> None:
        """A task changed in this process: look at the due times again now."""
        self._wake.set()

    def tick(self) -> list[int]:
        """Claim and start what is due now; end orphaned runs. Returns the claimed runs."""
        with self.app.app_context():
            try:
                if turn_manager().stopping:
                    return []
                claimed = claim_due(self.now())
                for run_id in claimed:
                    try:
                        start_run(run_id)
                    except Exception:
                        db.session.rollback()
                        log.exception("task run %s could not start", run_id)
                self._end_orphans()
                return claimed
            finally:
                db.session.remove()

    def seconds_to_next(self) -> float:
        """Seconds until the earliest due time (at most the poll interval)."""
        poll = float(self.app.config["NUMI_TASK_POLL_SECONDS"])
        with self.app.app_context():
            try:
                earliest = db.session.execute(
                    select(func.min(Task.next_run_at)).where(Task.paused.is_(False))
                ).scalar_one_or_none()
            finally:
                db.session.remove()
        if earliest is None:
            return poll
        return max(0.0, min(poll, (earliest - self.now()).total_seconds()))

    def _loop(self) -> None:
        while True:
            try:
                self.tick()
                wait = self.seconds_to_next()
            except Exception:
                log.exception("the task scheduler's round failed")
                wait = float(self.app.config["NUMI_TASK_POLL_SECONDS"])
            # At least a moment between rounds: a due time just passed is claimed now.
            self._wake.wait(timeout=max(wait, 0.2))
            self._wake.clear()

    def _end_orphans(self) -> None:
        stale = db.session.execute(
            select(TaskRun)
            .where(TaskRun.status == "running", TaskRun.started_at < utcnow() - ORPHAN_AFTER)
            .limit(20)
        ).scalars()
        manager = turn_manager()
        for run in list(stale):
            if run.chat_id is not None and manager.running_or_unknown(run.chat_id) is not False:
                continue
            record_answer(run, None)
