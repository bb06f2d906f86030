"""The API gateway's data (numi/gateway): keys that open /v1, each request's usage, the
points that let a stateless client's next request continue the chat it started, and the
user's model aliases."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, json_property, utcnow


class ApiKey(db.Model):
    """A key for /v1 (and nothing else). Only its hash is kept; `prefix` is the first
    characters of the key, shown so the user can tell keys apart. `scopes` is
    {"endpoints": [ids] | None, "projects": [ids] | None, "uses": [...]}: None allows
    every one; `uses` is what the key may do (numi.gateway.keys.USES; absent: /v1 only).
    `keep` says whether the key's conversations are kept as chats."""

    __tablename__ = "api_keys"
    __table_args__ = (IDS_NEVER_REUSED,)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes_json: Mapped[str | None] = mapped_column(Text)
    keep: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    scopes = json_property("scopes_json", dict)

    def to_dict(self) -> dict[str, Any]:
        scopes = self.scopes
        return {
            "id": self.id,
            "name": self.name,
            "prefix": self.prefix,
            "endpoints": scopes.get("endpoints"),
            "projects": scopes.get("projects"),
            "uses": scopes["uses"] if isinstance(scopes.get("uses"), list) else ["chat"],
            "keep": self.keep,
            "created_at": iso(self.created_at),
            "last_used_at": iso(self.last_used_at),
            "revoked": self.revoked_at is not None,
        }


class ApiRequest(db.Model):
    """One /v1 model request: who asked (key), which model answered, its tokens, and the
    chat it was kept in (None when the key keeps nothing). Usage per key reads these."""

    __tablename__ = "api_requests"
    __table_args__ = (Index("ix_api_requests_user_created", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    model: Mapped[str | None] = mapped_column(String(200))
    input_tokens: Mapped[int | None]
    output_tokens: Mapped[int | None]
    chat_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiThreadPoint(db.Model):
    """A conversation as a client sent it, up to one message: `digest` is a hash of the
    messages so far (system prompts left out), `message_id` the kept row that ends them.
    A later request whose messages start with the same ones continues from that row."""

    __tablename__ = "api_thread_points"
    __table_args__ = (Index("ix_api_thread_points_key_digest", "key_id", "digest"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"))
    digest: Mapped[str] = mapped_column(String(64))
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    message_id: Mapped[int]


class ModelAlias(db.Model):
    """A name of the user's own for gateway clients (`fast`, `code`): a chain of routes,
    `routes` = [{"endpoint_id", "model"}, ...], the first answering and the rest its
    fallbacks (numi/gateway/aliases.py)."""

    __tablename__ = "model_aliases"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    routes_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    routes = json_property("routes_json", list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "routes": self.routes}
