"""Exactly once across processes: two processes on one PostgreSQL run scheduler rounds at
the same due times together (each a real app with its own turn manager, runs answered by
the scripted provider through the real SDK), and every (task, due time) runs once: one run
row, one question and one answer in its chat, one request to the provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from numi.extensions import db
from numi.models import Message, Task, TaskRun
from numi.testing import Scenario
from sqlalchemy import func, select

HERE = Path(__file__).resolve().parent
TASKS = 2
ROUNDS = 2  # two days' due times


def test_each_due_time_runs_once_with_two_processes_on_postgresql(
    postgres_database_url, tmp_path, scripted
):
    from fixtures.databases import _build_app
    from fixtures.provider import add_scripted_endpoint

    app = _build_app(postgres_database_url, tmp_path / "setup", {"NUMI_TASK_SCHEDULER": False})
    client = app.test_client()
    endpoint = add_scripted_endpoint(client, scripted)
    for n in range(TASKS):
        created = client.post(
            "/api/tasks",
            json={
                "prompt": f"Report {n}",
                "schedule": "every day at 8:00",
                "timezone": "UTC",
                "endpoint_id": endpoint,
            },
        )
        assert created.status_code == 201
    for _ in range(TASKS * ROUNDS):
        scripted.enqueue(Scenario().text("Report ready."))
    with app.app_context():
        first_due = db.session.execute(select(func.min(Task.next_run_at))).scalar_one()
    times = [(first_due + timedelta(days=day, seconds=1)).isoformat() for day in range(ROUNDS)]

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]),
    }
    processes = [
        subprocess.Popen(
            [sys.executable, str(HERE / "claim_race.py"), postgres_database_url, str(tmp_path / f"p{n}"), *times],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        for n in range(2)
    ]  # fmt: skip
    try:
        for process in processes:
            assert process.stdout.readline().strip() == "ready"
        for process in processes:  # both go at once
            process.stdin.write("go\n")
            process.stdin.flush()
        claimed = [
            json.loads(process.communicate(timeout=90)[0].strip().splitlines()[-1])
            for process in processes
        ]
    finally:
        for process in processes:
            process.kill()
    assert all(p.returncode == 0 for p in processes)
    every = claimed[0] + claimed[1]
    assert len(every) == len(set(every)) == TASKS * ROUNDS
    with app.app_context():
        runs = db.session.execute(select(TaskRun)).scalars().all()
        assert len(runs) == TASKS * ROUNDS
        assert len({(r.task_id, r.due_at) for r in runs}) == TASKS * ROUNDS
        assert {r.status for r in runs} == {"done"}
        for run in runs:
            messages = (
                db.session.execute(select(Message.role).where(Message.chat_id == run.chat_id))
                .scalars()
                .all()
            )
            assert messages == ["user", "assistant"]
    assert len(scripted.requests) == TASKS * ROUNDS
    assert datetime.fromisoformat(times[-1]) > first_due
