"""SQLAlchemy models: the data of DESIGN §3.

JSON columns are stored as text (portable across SQLite and PostgreSQL) and exposed through
typed properties (`message.tool_calls`, `chat.settings`, ...). Chats and messages are
soft-deleted: `deleted_at` set, row kept; every query filters on it.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    and_,
    false,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .extensions import db


def utcnow() -> datetime:
    # Naive UTC: SQLite has no time zones, and naive values compare the same on both backends.
    return datetime.now(UTC).replace(tzinfo=None)


def new_chat_id() -> str:
    return str(uuid.uuid4())


def _loads(text: str | None, empty: Any) -> Any:
    if not text:
        return empty
    return json.loads(text)


def _dumps(value: Any) -> str | None:
    if value is None or value == [] or value == {}:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_property(column: str, empty_factory: type):
    """A read/write property that (de)serialises the JSON text column `column`."""

    def getter(self):
        return _loads(getattr(self, column), empty_factory())

    def setter(self, value):
        setattr(self, column, _dumps(value))

    return property(getter, setter)


class User(db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(100), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(default=False)
    # "system", "light" or "dark": rendered on <html data-theme> so it applies before first paint.
    theme: Mapped[str] = mapped_column(String(8), default="system", server_default="system")
    # Stamped into the session cookie at login; logout, "Log out everywhere" and a password
    # change raise it, so every cookie issued before stops working (cookies live client-side).
    session_version: Mapped[int] = mapped_column(default=0, server_default="0")
    memory_enabled: Mapped[bool] = mapped_column(default=False, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The user's default fallback chain (Settings): [{endpoint_id, model}], used by chats
    # that have none of their own.
    fallbacks_json: Mapped[str | None] = mapped_column(Text)

    fallbacks = json_property("fallbacks_json", list)

    # Settings → Voice: {endpoint_id, stt_model, tts_model, tts_voice} (numi/web/voice.py).
    voice_json: Mapped[str | None] = mapped_column(Text)

    voice = json_property("voice_json", dict)


class LoginFailure(db.Model):
    """Recent failed logins of one throttle key (a username, a client address, or the pair),
    so that every process sees the same limits (numi/login_limits.py). The key is a hash:
    mistyped usernames are often passwords and are not kept in clear."""

    __tablename__ = "login_failures"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(default=0)
    # Seconds since the epoch, as the throttle's clock gives them.
    last_failure_at: Mapped[float] = mapped_column(Float, index=True)
    blocked_until: Mapped[float] = mapped_column(Float, default=0.0)


class ApiToken(db.Model):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]


class SpentSignInLink(db.Model):
    """A used one-time sign-in link (numi/sign_in_links.py): it never signs in again."""

    __tablename__ = "spent_sign_in_links"

    nonce: Mapped[str] = mapped_column(String(32), primary_key=True)
    spent_at: Mapped[datetime] = mapped_column(default=utcnow)


REASONING_POLICIES = ("auto", "preserve", "strip")


class Endpoint(db.Model):
    """A provider connection. `user_id` NULL means shared by every user (managed by admins)."""

    __tablename__ = "endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(32))
    # Stored sealed when it carries credentials (`user:pass@`, a query string): see
    # `base_url`, which reads and writes the plain URL. Text: a sealed URL is longer.
    base_url_stored: Mapped[str] = mapped_column("base_url", Text)
    # Never rendered back: templates and API serialisers only ever see `has_api_key`.
    # Stored sealed (AES-GCM, numi/crypto.py); `api_key` reads and writes the plaintext.
    api_key_stored: Mapped[str | None] = mapped_column("api_key", Text)
    default_model: Mapped[str | None] = mapped_column(String(200))
    models_json: Mapped[str | None] = mapped_column(Text)
    # Model ids the pickers leave out (the list from the provider stays whole).
    hidden_models_json: Mapped[str | None] = mapped_column(Text)
    models_fetched_at: Mapped[datetime | None]
    # The user's say over the server's: {"retries": false} turns Numi's own retries off
    # (a gateway that retries already); {"model_capabilities": {model id: {"tools": true,
    # ...}}} overrides what a model is assumed or reported to do.
    settings_json: Mapped[str | None] = mapped_column(Text)
    reasoning_policy: Mapped[str] = mapped_column(String(16), default="auto")
    enabled: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None]

    models = json_property("models_json", list)
    hidden_models = json_property("hidden_models_json", list)
    settings = json_property("settings_json", dict)

    @property
    def retries(self) -> bool:
        """Whether Numi retries a failed call to this endpoint (off behind a gateway)."""
        return self.settings.get("retries", True) is not False

    @property
    def model_capabilities(self) -> dict[str, dict[str, Any]]:
        """The user's per-model capability overrides: {model id: {"tools": bool, ...}}."""
        value = self.settings.get("model_capabilities")
        return value if isinstance(value, dict) else {}

    @property
    def api_key(self) -> str | None:
        """The plaintext key (SecretUnreadable when sealed under another secret key)."""
        from .crypto import unseal

        return unseal(self.api_key_stored) if self.api_key_stored else None

    @api_key.setter
    def api_key(self, value: str | None) -> None:
        from .crypto import seal

        self.api_key_stored = seal(value) if value else None

    @property
    def base_url(self) -> str:
        """The plain base URL the adapter calls (SecretUnreadable when sealed under another
        secret key)."""
        from .crypto import unseal

        return unseal(self.base_url_stored) if self.base_url_stored else self.base_url_stored

    @base_url.setter
    def base_url(self, value: str) -> None:
        from .crypto import seal_url_credentials

        self.base_url_stored = seal_url_credentials(value)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_stored)

    @property
    def model_ids(self) -> list[str]:
        return [m["id"] if isinstance(m, dict) else str(m) for m in self.models]

    @property
    def picker_model_ids(self) -> list[str]:
        """The listed models the pickers offer (the hidden ones left out)."""
        hidden = set(self.hidden_models)
        return [m for m in self.model_ids if m not in hidden]

    def base_url_for(self, viewer) -> str:
        """The base URL as `viewer` (a User) may see it: whole for its owner and admins; a
        shared endpoint's other users see only its scheme, host and port, never the
        `user:pass@` or `?api-key=` an admin may have put in it."""
        if viewer is None or viewer.is_admin or self.user_id == viewer.id:
            return self.base_url
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"  # an IPv6 literal
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}"

    def to_dict(self, viewer=None) -> dict[str, Any]:
        """The endpoint for the API (never its key); `viewer` decides what of its base URL
        shows (`base_url_for`)."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url_for(viewer),
            "default_model": self.default_model,
            "models": self.model_ids,
            "hidden_models": self.hidden_models,
            "retries": self.retries,
            "model_capabilities": self.model_capabilities,
            "reasoning_policy": self.reasoning_policy,
            "enabled": self.enabled,
            "shared": self.user_id is None,
            "has_api_key": self.has_api_key,
        }


class Chat(db.Model):
    __tablename__ = "chats"
    __table_args__ = (
        Index("ix_chats_user_recent", "user_id", "deleted_at", "updated_at", "id"),
        # The sidebar: live, not archived, not pinned, by last activity (equality on the
        # leading columns, so the keyset page is one index range scan).
        # The sweep of idle temporary chats.
        Index("ix_chats_temporary", "temporary", "updated_at"),
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

    # Lists load these eagerly: the sidebar joins them into its page query (one round trip).
    tag_rows: Mapped[list[ChatTag]] = relationship(
        cascade="all, delete-orphan", lazy="select", passive_deletes=True
    )

    settings = json_property("settings_json", dict)

    @property
    def tags(self) -> list[str]:
        """The chat's tags, sorted. Lists preload them; a chat held outside its session (the
        live view's) reads them with one query instead of lazy-loading a detached relation."""
        from sqlalchemy import inspect, select

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
            "tags": self.tags,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
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
    request_id: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None]

    content_parts = json_property("content_parts_json", list)
    reasoning_details = json_property("reasoning_details_json", list)
    tool_calls = json_property("tool_calls_json", list)
    citation_sources = json_property("citation_sources_json", list)

    @property
    def meta(self) -> dict[str, Any]:
        return _loads(self.meta_json, {})

    @meta.setter
    def meta(self, value: dict[str, Any] | None) -> None:
        self.meta_json = _dumps(value)
        self.model, self.input_tokens, self.output_tokens = usage_columns(value or {})

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
            "created_at": _iso(self.created_at),
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
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    attachments = json_property("attachments_json", list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "message": self.content,
            "attachments": self.attachments,
            "request_id": self.request_id,
            "created_at": _iso(self.created_at),
        }


class Attachment(db.Model):
    __tablename__ = "attachments"
    __table_args__ = (Index("ix_attachments_user_sha", "user_id", "sha256"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    mime: Mapped[str] = mapped_column(String(100))
    size: Mapped[int]
    sha256: Mapped[str] = mapped_column(String(64))
    storage_path: Mapped[str] = mapped_column(String(500))
    extracted_text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "filename": self.filename,
            "mime": self.mime,
            "size": self.size,
            "sha256": self.sha256,
            "created_at": _iso(self.created_at),
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


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() + "Z" if value else None


class ToolSettings(db.Model):
    """A user's settings for tools that reach outside Numi (the web search backend, fetch limits)."""

    __tablename__ = "tool_settings"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    settings_json: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    settings = json_property("settings_json", dict)


class DocumentIndex(db.Model):
    """Search-indexing state of one uploaded document (its chunks live in fts_document_chunks)."""

    __tablename__ = "document_index"

    attachment_id: Mapped[int] = mapped_column(
        ForeignKey("attachments.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(
        String(16), default="pending"
    )  # pending|indexing|done|error
    chunks: Mapped[int] = mapped_column(default=0)  # chunks indexed so far
    chunks_total: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    indexed_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class McpServer(db.Model):
    """A user's MCP server: Streamable HTTP by URL, or (admins only) stdio by command."""

    __tablename__ = "mcp_servers"

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
    __table_args__ = (UniqueConstraint("user_id", "command"),)

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
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }


from .project_models import Memory, Project, ProjectFile  # noqa: E402, F401 (same metadata)
