"""A user's own setup: tool settings, MCP servers, model prices and saved prompts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Float,
    ForeignKey,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, json_property, utcnow


class ToolSettings(db.Model):
    """A user's settings for tools that reach outside Numi (the web search backend, fetch limits)."""

    __tablename__ = "tool_settings"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    settings_json: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    settings = json_property("settings_json", dict)


class McpServer(db.Model):
    """A user's MCP server: Streamable HTTP by URL, or (admins only) stdio by command."""

    __tablename__ = "mcp_servers"
    __table_args__ = (IDS_NEVER_REUSED,)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    transport: Mapped[str] = mapped_column(String(16))  # "http" | "stdio"
    url: Mapped[str | None] = mapped_column(String(500))
    command: Mapped[str | None] = mapped_column(String(500))
    args_json: Mapped[str | None] = mapped_column(Text)
    env_json: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(default=True)
    always_approve: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None]

    args = json_property("args_json", list)
    env = json_property("env_json", dict)


class ModelPrice(db.Model):
    """A user's price for a model, per million tokens in and out (turns usage into cost)."""

    __tablename__ = "model_prices"
    __table_args__ = (UniqueConstraint("user_id", "model"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(200))
    input_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    output_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_per_mtok": self.input_per_mtok,
            "output_per_mtok": self.output_per_mtok,
        }


class Prompt(db.Model):
    """A saved prompt of one user: typed as `/command` in the composer, its text fills the
    message box (placeholders such as `{{input}}` are filled in the browser, before sending).
    The command is unique per user; the unique index also serves the owner's sorted list."""

    __tablename__ = "prompts"
    __table_args__ = (UniqueConstraint("user_id", "command"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    command: Mapped[str] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "command": self.command,
            "title": self.title,
            "text": self.text,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }
