"""Research runs (issue 38): a question answered in research mode, and the pages it read.

A run is found by its question (`chat_id`, `request_id`): after a restart the turn that
answers the question again reads the run and goes on from its last saved step. Every step
is saved as it finishes: the plan and each search in `state_json`, each page read (or
skipped, and why) as a `research_sources` row with its capped text, so a resumed run never
fetches a saved page again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, json_property, utcnow

# A run that is not over: a process that starts resumes these (numi/agent/research_resume.py).
UNFINISHED = ("running", "writing")


class ResearchRun(db.Model):
    __tablename__ = "research_runs"
    __table_args__ = (
        UniqueConstraint("chat_id", "request_id", name="uq_research_runs_question"),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    request_id: Mapped[str] = mapped_column(String(100))
    # "running" (planning, searching, reading), "writing" (the report), "done", "stopped"
    # (Stop: what was read is kept), "asked" (a clarifying question instead) or "failed".
    status: Mapped[str] = mapped_column(String(20), default="running", index=True)
    # {max_steps, max_pages, max_tokens, time_limit_seconds} (agent/research_budget.py).
    budget_json: Mapped[str] = mapped_column(Text)
    # The saved steps: {"plan": [...], "searches": [{query, results}], "log": [...]}.
    state_json: Mapped[str | None] = mapped_column(Text)
    # "write" when Stop and write was asked: the run writes its report at its next step.
    stop_request: Mapped[str | None] = mapped_column(String(20))
    steps: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    # Seconds spent in earlier processes: the time limit counts across restarts.
    elapsed_seconds: Mapped[int] = mapped_column(Integer, default=0)
    resumes: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]

    budget = json_property("budget_json", dict)
    state = json_property("state_json", dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "status": self.status,
            "budget": self.budget,
            "steps": self.steps,
            "tokens": self.tokens,
            "resumes": self.resumes,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
        }


class ResearchSource(db.Model):
    __tablename__ = "research_sources"
    __table_args__ = (
        UniqueConstraint("run_id", "url", name="uq_research_sources_url"),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(
        ForeignKey("research_runs.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(String(300))
    # "read" or "skipped" (with `reason`: refused address, not text, failed).
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    # The page's readable text, capped (NUMI_RESEARCH_PAGE_CHARS); never rendered as HTML.
    text: Mapped[str | None] = mapped_column(Text)
    read_at: Mapped[datetime] = mapped_column(default=utcnow)
