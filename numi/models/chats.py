"""Chats and their messages: the transcript, its versions, the follow-up queue, compaction
checkpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    and_,
    false,
    inspect,
    select,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from .columns import dumps, iso, json_property, loads, new_chat_id, utcnow


class Chat(db.Model):
    __tablename__ = "chats"
    __table_args__ = (
        Index("ix_chats_user_recent", "user_id", "deleted_at", "updated_at", "id"),
        # The sidebar: live, not archived, not pinned, by last activity (equality on the
        # leading columns, so the keyset page is one index range scan).
        # The sweep of idle temporary chats.
        Index("ix_chats_temporary", "temporary", "updated_at"),
        # An import finds the chats a file already brought in (import_writer.begin_chat).
        Index("ix_chats_user_import", "user_id", "import_source", "import_id"),
        Index(
            "ix_chats_user_sidebar",
            "user_id",
            "deleted_at",
            "archived_at",
            "pinned_at",
            "updated_at",
            "id",
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_chat_id)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(300), default="New chat")
    endpoint_id: Mapped[int | None] = mapped_column(ForeignKey("endpoints.id", ondelete="SET NULL"))
    model: Mapped[str | None] = mapped_column(String(200))
    settings_json: Mapped[str | None] = mapped_column(Text)
    project_id: Mapped[int | None] = mapped_column(index=True)  # projects.id; see migration
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    pinned_at: Mapped[datetime | None]
    archived_at: Mapped[datetime | None]
    deleted_at: Mapped[datetime | None]
    # A temporary chat is listed nowhere and discarded when its user starts another chat or
    # after NUMI_TEMPORARY_CHAT_HOURS without activity (numi/chat/temporary.py).
    temporary: Mapped[bool] = mapped_column(default=False, server_default=false())
    # A chat kept from /v1 requests (numi/gateway): the key that made it (api_keys.id), named
    # in the sidebar. No database-level foreign key, as for project_id: on SQLite adding one
    # copies the chats table; keys are revoked, never deleted, so the id stays meaningful.
    api_key_id: Mapped[int | None] = mapped_column(index=True)
    # That key's name when the chat was made (keys are never renamed): the sidebar's mark,
    # read with the chat itself instead of one more query per row.
    api_key_name: Mapped[str | None] = mapped_column(String(100))
    # Where an imported chat came from: the format (`chatgpt`, `claude`...) and the chat's id
    # in that app's file. Importing the same file again adds nothing (numi/chat/import_writer.py).
    import_source: Mapped[str | None] = mapped_column(String(40))
    import_id: Mapped[str | None] = mapped_column(String(200))

    # Lists load these eagerly: the sidebar joins them into its page query (one round trip).
    tag_rows: Mapped[list[ChatTag]] = relationship(
        cascade="all, delete-orphan", lazy="select", passive_deletes=True
    )

    settings = json_property("settings_json", dict)

    @property
    def tags(self) -> list[str]:
        """The chat's tags, sorted. Lists preload them; a chat held outside its session (the
        live view's) reads them with one query instead of lazy-loading a detached relation."""
        if "tag_rows" not in inspect(self).unloaded:
            tags = [row.tag for row in self.tag_rows]
        else:
            tags = list(
                db.session.execute(select(ChatTag.tag).where(ChatTag.chat_id == self.id)).scalars()
            )
        return sorted(tags, key=str.casefold)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "endpoint_id": self.endpoint_id,
            "model": self.model,
            "settings": self.settings,
            "project_id": self.project_id,
            "pinned": self.pinned_at is not None,
            "archived": self.archived_at is not None,
            "temporary": self.temporary,
            "api_key": self.api_key_name,
            "tags": self.tags,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


class ChatTag(db.Model):
    """One tag of a chat. A table, not a JSON column: the sidebar filter is an index lookup
    by (user, tag), and `user_id` keeps every tag query scoped to its owner."""

    __tablename__ = "chat_tags"
    __table_args__ = (Index("ix_chat_tags_user_tag", "user_id", "tag", "chat_id"),)

    chat_id: Mapped[str] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True
    )
    tag: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))


class Message(db.Model):
    """One message. Versions (regenerate, edit) form a tree through `parent_id`; the
    transcript is the active branch: `active` is true on every row of it, so reading the
    transcript stays "rows of the chat by id" with one extra indexed condition (`shown()`).

    - `parent_id`: the message this one followed when it was saved, 0 for a first message
      (NULL is left to the column default, which finds the parent); siblings (same parent)
      are versions of each other. A parent always has a smaller id.
    - `selected`: this is the version its parent shows (exactly one per set of siblings).
    - `active`: selected, and so is every ancestor (kept up to date by `numi.chat.versions`).
    - `input_tokens`, `output_tokens`, `model`: copied from `meta` when it is set, so usage
      sums run in SQL on both backends.
    - `in_context`: false when the user left the message out of the model's context; it
      stays in the transcript (marked) and no request carries it.
    """

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("chat_id", "request_id"),
        Index("ix_messages_chat_id_id", "chat_id", "id"),
        Index("ix_messages_chat_active_id", "chat_id", "active", "id"),
        Index("ix_messages_chat_parent", "chat_id", "parent_id"),
        # A chat's live messages, newest first, and their count, read from the index alone:
        # a turn in a long chat loads its newest messages and counts the ones left out.
        Index("ix_messages_chat_live", "chat_id", "deleted_at", "id"),
        # Strictly increasing ids on SQLite too: the id orders the transcript.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    parent_id: Mapped[int | None] = mapped_column(
        Integer, default=lambda context: _branch_tip(context)
    )
    selected: Mapped[bool] = mapped_column(default=True, server_default=true())
    active: Mapped[bool] = mapped_column(default=True, server_default=true())
    in_context: Mapped[bool] = mapped_column(default=True, server_default=true())
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(Text)
    content_parts_json: Mapped[str | None] = mapped_column(Text)
    reasoning_content: Mapped[str | None] = mapped_column(Text)
    reasoning_details_json: Mapped[str | None] = mapped_column(Text)
    tool_calls_json: Mapped[str | None] = mapped_column(Text)
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    citation_sources_json: Mapped[str | None] = mapped_column(Text)
    meta_json: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    input_tokens: Mapped[int | None]
    output_tokens: Mapped[int | None]
    # The prompt tokens the provider read from its cache (Usage sums what caching saved).
    cached_tokens: Mapped[int | None]
    request_id: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None]

    content_parts = json_property("content_parts_json", list)
    reasoning_details = json_property("reasoning_details_json", list)
    tool_calls = json_property("tool_calls_json", list)
    citation_sources = json_property("citation_sources_json", list)

    @property
    def meta(self) -> dict[str, Any]:
        return loads(self.meta_json, {})

    @meta.setter
    def meta(self, value: dict[str, Any] | None) -> None:
        self.meta_json = dumps(value)
        self.model, self.input_tokens, self.output_tokens = usage_columns(value or {})
        self.cached_tokens = cached_column(value or {})

    @classmethod
    def shown(cls):
        """The condition for a row of the transcript: on the active branch and not deleted."""
        return and_(cls.active.is_(True), cls.deleted_at.is_(None))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "parent_id": self.parent_id or None,
            "role": self.role,
            "content": self.content,
            "content_parts": self.content_parts,
            "reasoning_content": self.reasoning_content,
            "reasoning_details": self.reasoning_details,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "citation_sources": self.citation_sources,
            "meta": self.meta,
            "request_id": self.request_id,
            "in_context": self.in_context is not False,
            "created_at": iso(self.created_at),
        }


def _branch_tip(context) -> int | None:
    """The default parent of a new message: the newest row of its chat's shown branch, so
    every writer continues the transcript (a regenerate or an edit has just moved the tip
    to where the new version starts), or 0 in an empty chat. Importers and forks set the
    parent themselves (0 for a first message: None would mean "use this default")."""
    chat_id = context.get_current_parameters().get("chat_id")
    return context.connection.execute(
        text("SELECT coalesce(max(id), 0) FROM messages WHERE chat_id = :chat AND active"),
        {"chat": chat_id},
    ).scalar()


def usage_columns(meta: dict[str, Any]) -> tuple[str | None, int | None, int | None]:
    """(model, input tokens, output tokens) of an answer's meta: `usage` as the provider
    reported it, else the turn's `metrics`; anything that is not a count is left out."""
    usage = meta.get("usage") if isinstance(meta.get("usage"), dict) else {}
    metrics = meta.get("metrics") if isinstance(meta.get("metrics"), dict) else {}

    def count(key: str) -> int | None:
        value = usage.get(key, metrics.get(key))
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        )

    model = meta.get("model")
    return (
        (model[:200] if isinstance(model, str) and model else None),
        count("input_tokens"),
        count("output_tokens"),
    )


def cached_column(meta: dict[str, Any]) -> int | None:
    """The cached prompt tokens of an answer's meta (`usage.cached_input_tokens`)."""
    usage = meta.get("usage") if isinstance(meta.get("usage"), dict) else {}
    value = usage.get("cached_input_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class QueuedMessage(db.Model):
    """A follow-up sent while a turn ran: it waits here (not in the process) so it starts
    when the turn ends even if every browser has closed, and survives a restart."""

    __tablename__ = "queued_messages"
    __table_args__ = (
        Index("ix_queued_messages_chat_id_id", "chat_id", "id"),
        UniqueConstraint("chat_id", "request_id"),
        {"sqlite_autoincrement": True},  # the id is the queue's order
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    content: Mapped[str] = mapped_column(Text)
    attachments_json: Mapped[str | None] = mapped_column(Text)
    request_id: Mapped[str] = mapped_column(String(100))
    timezone: Mapped[str | None] = mapped_column(String(64))
    tz_offset: Mapped[int | None]
    # The values the send let through unredacted ("Send as is once"): they apply to this
    # follow-up's turn when it starts, and go with the row.
    exempt_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    attachments = json_property("attachments_json", list)
    exempt = json_property("exempt_json", list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "message": self.content,
            "attachments": self.attachments,
            "request_id": self.request_id,
            "created_at": iso(self.created_at),
        }


class Checkpoint(db.Model):
    """A compaction summary: replaces messages up to `through_message_id` in model context."""

    __tablename__ = "checkpoints"
    __table_args__ = (Index("ix_checkpoints_chat_id_id", "chat_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    summary: Mapped[str] = mapped_column(Text)
    through_message_id: Mapped[int]
    messages_before: Mapped[int] = mapped_column(default=0)
    messages_after: Mapped[int] = mapped_column(default=0)
    tokens_before: Mapped[int] = mapped_column(default=0)
    tokens_after: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RedactedValue(db.Model):
    """A placeholder of a chat's privacy gateway and the value it stands for (`[EMAIL_1]`
    ⇄ the address): made when a request first carries the value, kept with the chat so
    the same value has the same placeholder in every later request (numi/redaction/)."""

    __tablename__ = "redacted_values"
    __table_args__ = (UniqueConstraint("chat_id", "placeholder"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    placeholder: Mapped[str] = mapped_column(String(40))
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
