"""Scheduled tasks (issue 38): a prompt that runs on a schedule, and each of its runs.

A task's `next_run_at` (UTC) is the due time the scheduler waits for; a process claims a
due time by moving it on with a conditional UPDATE (`WHERE next_run_at = <the due time it
read>`) and inserting the run in the same short transaction, and (task_id, due_at) is
unique: each due time runs once however many processes look (numi/tasks/runs.py). A run's
`request_id` is its question's request_id, by which the turn-end hook finds the run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, json_property, utcnow


class Task(db.Model):
    __tablename__ = "tasks"
    # The scheduler's one query: the unpaused tasks due by now.
    __table_args__ = (Index("ix_tasks_due", "paused", "next_run_at"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    # The route: an endpoint and model, or (both NULL) the project's defaults and fallback
    # chain. A deleted endpoint or project pauses the task with the reason at its next run.
    endpoint_id: Mapped[int | None] = mapped_column(ForeignKey("endpoints.id", ondelete="SET NULL"))
    model: Mapped[str | None] = mapped_column(String(200))
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="SET NULL"))
    tools_json: Mapped[str | None] = mapped_column(Text)
    # What the user wrote (a preset or a cron expression) and the cron expression it means.
    schedule: Mapped[str] = mapped_column(String(200))
    cron: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64))
    # "new_chat" (a chat per run) or "chat" (every run appended to `chat_id`; made at the
    # first run when none was given).
    destination: Mapped[str] = mapped_column(String(20), default="new_chat")
    chat_id: Mapped[str | None] = mapped_column(ForeignKey("chats.id", ondelete="SET NULL"))
    webhook_url: Mapped[str | None] = mapped_column(Text)
    # The page's address when the task was last saved (https://numi.example/): the webhook's
    # link to a result is absolute, and a run has no request to read it from.
    link_base: Mapped[str | None] = mapped_column(Text)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # Why the task paused itself (its route or chat is gone), as {code, message}; NULL when
    # the user paused it or it runs.
    paused_code: Mapped[str | None] = mapped_column(String(60))
    paused_reason: Mapped[str | None] = mapped_column(Text)
    next_run_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    tools = json_property("tools_json", list)


class TaskRun(db.Model):
    __tablename__ = "task_runs"
    __table_args__ = (
        # Exactly once per due time, whichever process claims it first.
        UniqueConstraint("task_id", "due_at", name="uq_task_runs_due"),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # The time it was due (a manual run: when Run now was pressed).
    due_at: Mapped[datetime]
    # "schedule" or "manual" (Run now).
    trigger: Mapped[str] = mapped_column(String(20), default="schedule")
    # Seconds after its due time the run began (a process was down): said on the page.
    late_seconds: Mapped[int] = mapped_column(Integer, default=0)
    # "running", "done" or "failed".
    status: Mapped[str] = mapped_column(String(20), default="running")
    error_code: Mapped[str | None] = mapped_column(String(60))
    error_message: Mapped[str | None] = mapped_column(Text)
    request_id: Mapped[str] = mapped_column(String(100), unique=True)
    chat_id: Mapped[str | None] = mapped_column(ForeignKey("chats.id", ondelete="SET NULL"))
    message_id: Mapped[int | None] = mapped_column(Integer)
    title: Mapped[str | None] = mapped_column(String(200))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]

    def to_dict(self) -> dict[str, Any]:
        duration = (
            (self.finished_at - self.started_at).total_seconds() if self.finished_at else None
        )
        return {
            "id": self.id,
            "task_id": self.task_id,
            "due_at": iso(self.due_at),
            "trigger": self.trigger,
            "late_seconds": self.late_seconds,
            "status": self.status,
            "error": (
                {"code": self.error_code, "message": self.error_message}
                if self.error_code
                else None
            ),
            "chat_id": self.chat_id,
            "message_id": self.message_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": None if self.cost is None else round(self.cost, 6),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "duration_seconds": None if duration is None else round(duration, 3),
        }
