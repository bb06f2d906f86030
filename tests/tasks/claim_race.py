"""One of the processes of tests/tasks/test_tasks_two_processes.py: an app on the shared
database whose scheduler runs under a clock the test names. It waits for "go" on stdin
(so that both processes start together), runs one scheduler round at each given time,
waits until its own runs are recorded, and prints the ids of the runs it claimed."""

from gevent import monkey

monkey.patch_all()  # as `numi serve` does: the turns run in greenlets on patched sockets

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from datetime import datetime  # noqa: E402

import gevent  # noqa: E402
import gevent.util  # noqa: E402
from sqlalchemy import select  # noqa: E402

from numi import create_app  # noqa: E402
from numi.extensions import db  # noqa: E402
from numi.models import Message, TaskRun  # noqa: E402
from numi.services import services  # noqa: E402


def main(database_url: str, data_dir: str, times: list[str]) -> None:
    app = create_app(
        {
            "NUMI_DATABASE_URL": database_url,
            "NUMI_DATA_DIR": data_dir,
            "NUMI_SECRET_KEY": "test-secret-key",
            "NUMI_AUTO_ENDPOINTS": False,
            "NUMI_GENERATE_TITLES": False,
            "NUMI_PROVIDER_MAX_RETRIES": 0,
            "NUMI_TASK_SCHEDULER": False,  # rounds are run here, at the named times
        }
    )
    scheduler = services(app).task_scheduler
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    claimed: list[int] = []
    for moment in times:
        scheduler.clock = lambda moment=moment: datetime.fromisoformat(moment)
        claimed += scheduler.tick()
    deadline = time.monotonic() + 60
    with app.app_context():
        while db.session.execute(
            select(TaskRun.id).where(TaskRun.id.in_(claimed), TaskRun.status == "running")
        ).first():
            if time.monotonic() > deadline:
                # What a run that did not end holds, and every greenlet's stack: this named
                # the provider SDK's import hang (numi/cpu_pool.py, import_off_hub).
                print(json.dumps(_stuck(claimed), default=str), file=sys.stderr, flush=True)
                print("\n".join(gevent.util.format_run_info()), file=sys.stderr, flush=True)
                raise AssertionError("runs did not end")
            db.session.remove()
            gevent.sleep(0.02)
    print(json.dumps(claimed), flush=True)


def _stuck(claimed: list[int]) -> list[dict]:
    """The claimed runs still running, each with its chat's messages."""
    runs = db.session.execute(
        select(TaskRun).where(TaskRun.id.in_(claimed), TaskRun.status == "running")
    ).scalars()
    return [
        {
            "run": {key: getattr(run, key) for key in ("id", "task_id", "due_at", "chat_id")},
            "request_id": run.request_id,
            "messages": [
                {"role": m.role, "request_id": m.request_id, "meta": m.meta, "content": m.content}
                for m in db.session.execute(
                    select(Message).where(Message.chat_id == run.chat_id).order_by(Message.id)
                ).scalars()
            ],
        }
        for run in runs
    ]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
