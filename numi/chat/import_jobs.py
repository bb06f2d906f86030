"""Import jobs: one running import per user, its progress, its end (issue 34).

The row (numi/models/imports.py) is the job's whole state, so any server process answers
its status, and a job whose process died is found by its heartbeat: a running job not
touched for `STALE_SECONDS` is failed (`import_interrupted`) and what it wrote is deleted
the next time its user asks about it or starts another import.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ..errors import NumiError
from ..extensions import db
from ..models import ImportJob, get_owned, utcnow
from .import_writer import discard

# The runner touches its job at least this often, between batches or while the file is read.
HEARTBEAT_SECONDS = 15
# A running job not touched for this long died with its process.
STALE_SECONDS = 120


def import_running() -> NumiError:
    """The refusal of a second import while the user's first one runs."""
    return NumiError(
        "import_running",
        "An import of yours is still running; wait for it to finish, then import again.",
        409,
    )


def interrupted() -> NumiError:
    """The end of a job whose server process stopped before it finished."""
    return NumiError(
        "import_interrupted",
        "The import stopped when the server restarted; nothing was imported. Import the file again.",
        503,
    )


def start_job(user_id: int) -> ImportJob:
    """A new running job for `user_id` (committed), or `import_running` when one runs."""
    running = db.session.execute(
        select(ImportJob).where(ImportJob.user_id == user_id, ImportJob.running.is_(True))
    ).scalar_one_or_none()
    if running is not None:
        _end_if_stale(running)
    job = ImportJob(user_id=user_id)
    db.session.add(job)
    try:
        db.session.commit()
    except IntegrityError:  # (user_id, running) is unique: another request won the race
        db.session.rollback()
        raise import_running() from None
    return job


def get_job(user_id: int, job_id: int) -> ImportJob:
    """The user's job (404 for another user's or a missing one), ended first if it died."""
    job = get_owned(ImportJob, job_id, user_id, "import")
    if job.running:
        _end_if_stale(job)
    return job


def touch(job_id: int) -> None:
    """The heartbeat of a job still reading its file (committed)."""
    job = db.session.get(ImportJob, job_id)
    if job is not None and job.running:
        job.updated_at = utcnow()
        db.session.commit()


def started(job: ImportJob, kind: str, total: int) -> None:
    """Record what the file holds once it has been read and checked (committed)."""
    job.kind, job.total, job.updated_at = kind, total, utcnow()
    db.session.commit()


def finish(job: ImportJob, result: dict[str, Any]) -> None:
    """End `job` with its result, in the caller's transaction (which commits)."""
    job.state, job.running, job.result = "done", None, result
    job.done = max(job.done, job.total)
    job.finished_at = job.updated_at = utcnow()


def fail(job_id: int, error: NumiError) -> None:
    """End the job with `error`, deleting every row it wrote (committed)."""
    job = db.session.get(ImportJob, job_id)
    if job is None or not job.running:
        return
    discard(job)
    job.state, job.running = "failed", None
    job.error_code, job.error_message = error.code, error.message
    job.finished_at = job.updated_at = utcnow()
    db.session.commit()


def _end_if_stale(job: ImportJob) -> None:
    if job.updated_at < utcnow() - timedelta(seconds=STALE_SECONDS):
        fail(job.id, interrupted())
        db.session.refresh(job)
