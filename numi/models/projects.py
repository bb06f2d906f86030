"""The tables of projects and memories (issue 21).

A project groups a user's chats: its instructions join the system context of every chat in
it, its `settings_json` holds the defaults of a new chat started there (the same keys as a
chat's settings), its files are attachments listed in `project_files`, and its memories are
memories with `project_id` set. A memory is a short fact a user keeps (or approved when the
model proposed it); with memory on, every request carries them.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, utcnow


class Project(db.Model):
    __tablename__ = "projects"
    __table_args__ = (Index("ix_projects_user_name", "user_id", "name"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    instructions: Mapped[str | None] = mapped_column(Text)
    settings_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    @property
    def settings(self) -> dict[str, Any]:
        """The defaults a new chat in the project takes (chat setting keys, plus
        `endpoint_id` and `model`)."""
        return json.loads(self.settings_json) if self.settings_json else {}

    @settings.setter
    def settings(self, value: dict[str, Any]) -> None:
        self.settings_json = json.dumps(value, ensure_ascii=False) if value else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "instructions": self.instructions or "",
            "settings": self.settings,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


class ProjectFile(db.Model):
    """An attachment owned by a project: its chats' `search_documents` searches it."""

    __tablename__ = "project_files"

    attachment_id: Mapped[int] = mapped_column(
        ForeignKey("attachments.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Memory(db.Model):
    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_user_project", "user_id", "project_id", "id"),
        IDS_NEVER_REUSED,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "project_id": self.project_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }
