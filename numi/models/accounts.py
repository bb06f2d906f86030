"""People and how they sign in: users, failed logins, API tokens, spent sign-in links."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Float,
    ForeignKey,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import json_property, utcnow


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

    # Settings → Documents: {embedding: "local" | "none" | {endpoint_id, model}}
    # (numi/knowledge/embedding.py); absent, the local model when its extra is installed.
    documents_json: Mapped[str | None] = mapped_column(Text)

    documents = json_property("documents_json", dict)

    # Settings → Markdown mirror: {folder, paused: {code, message}} (numi/chat/live_mirror.py);
    # absent, no mirror.
    mirror_json: Mapped[str | None] = mapped_column(Text)

    mirror = json_property("mirror_json", dict)


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
