"""The table of import jobs (issue 34): one row per uploaded export being imported.

An import runs in the background (numi/web/import_runner.py): the request that uploads the
file returns at once with the job, and the page or an API client polls its row for
progress and the result. `running` is true while the job works and NULL once it ended:
with the unique (user_id, running) pair, a user has at most one running import on every
backend and in every process (NULLs never collide). The chats a job writes stay hidden
(numi/chat/import_writer.py marks them) until its last, small transaction reveals them all,
or are deleted when it fails.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import iso, json_property, utcnow


class ImportJob(db.Model):
    __tablename__ = "import_jobs"
    __table_args__ = (
        UniqueConstraint("user_id", "running", name="uq_import_jobs_one_running"),
        # Its id is in URLs (/imports/<id>): never handed out twice on SQLite either.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # "running", "done" or "failed".
    state: Mapped[str] = mapped_column(String(20), default="running")
    running: Mapped[bool | None] = mapped_column(default=True)
    # What the file turned out to be: chats, project, prompts or memories (None while read).
    kind: Mapped[str | None] = mapped_column(String(20))
    done: Mapped[int] = mapped_column(Integer, default=0)  # messages written so far
    total: Mapped[int] = mapped_column(Integer, default=0)  # messages the file holds
    result_json: Mapped[str | None] = mapped_column(Text)
    error_code: Mapped[str | None] = mapped_column(String(60))
    error_message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The job's heartbeat: a running job not touched for a while died with its process.
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]

    result = json_property("result_json", dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "kind": self.kind,
            "progress": {"done": self.done, "total": self.total},
            "error": (
                {"code": self.error_code, "message": self.error_message}
                if self.error_code
                else None
            ),
            "result": self.result if self.state == "done" else None,
            "created_at": iso(self.created_at),
            "finished_at": iso(self.finished_at),
        }
