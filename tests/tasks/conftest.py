"""Fixtures for scheduled tasks: an in-process app on each backend whose scheduler runs on a
clock the test sets (`clock`), the scripted provider as its endpoint, and `ticked`, which
runs one scheduler round and waits for the runs' turns to end (never a sleep of its own)."""

from __future__ import annotations

import time
from datetime import datetime

import gevent
import pytest

from fixtures.provider import add_scripted_endpoint

from numi.services import services


class Clock:
    """The scheduler's injectable clock: naive UTC, moved by the test."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 3, 2, 6, 0))  # a Monday, 07:00 in Berlin


@pytest.fixture
def app(make_app, clock):
    # Titles are model calls of their own: they would take the scripted answers.
    app = make_app(NUMI_GENERATE_TITLES=False, NUMI_PROVIDER_MAX_RETRIES=0)
    services(app).task_scheduler.clock = clock
    return app


@pytest.fixture
def endpoint_id(client, scripted) -> int:
    return add_scripted_endpoint(client, scripted)


def wait_for_runs(app, run_ids) -> None:
    """Until the runs have ended and been recorded (their turn-end hook ran)."""
    from sqlalchemy import select

    from numi.extensions import db
    from numi.models import TaskRun

    deadline = time.monotonic() + 15
    while True:
        with app.app_context():
            statuses = db.session.execute(
                select(TaskRun.status).where(TaskRun.id.in_(list(run_ids)))
            ).scalars()
            if "running" not in set(statuses):
                return
            db.session.remove()
        assert time.monotonic() < deadline, "a task's run did not end"
        gevent.sleep(0.01)


@pytest.fixture
def ticked(app):
    """`ticked()`: one scheduler round at the clock's time; the claimed run ids, once their
    turns have ended and been recorded."""

    def tick() -> list[int]:
        claimed = services(app).task_scheduler.tick()
        wait_for_runs(app, claimed)
        return claimed

    return tick


@pytest.fixture
def settled(app):
    """`settled(run_ids)`: wait until those runs have ended and been recorded."""
    return lambda run_ids: wait_for_runs(app, run_ids)
