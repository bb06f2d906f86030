"""Provider connections (endpoints): where a model is reached, with its key sealed."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import (
    ForeignKey,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..crypto import seal, seal_url_credentials, unseal
from ..extensions import db
from .columns import IDS_NEVER_REUSED, json_property, utcnow


REASONING_POLICIES = ("auto", "preserve", "strip")


class Endpoint(db.Model):
    """A provider connection. `user_id` NULL means shared by every user (managed by admins)."""

    __tablename__ = "endpoints"
    __table_args__ = (IDS_NEVER_REUSED,)

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
    # Why the last fetch of the list failed (a message fit to show), None after a good one:
    # a failed refresh keeps the old list and says so in Settings and the pickers.
    models_problem: Mapped[str | None] = mapped_column(String(300))
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
        return unseal(self.api_key_stored) if self.api_key_stored else None

    @api_key.setter
    def api_key(self, value: str | None) -> None:
        self.api_key_stored = seal(value) if value else None

    @property
    def base_url(self) -> str:
        """The plain base URL the adapter calls (SecretUnreadable when sealed under another
        secret key)."""
        return unseal(self.base_url_stored) if self.base_url_stored else self.base_url_stored

    @base_url.setter
    def base_url(self, value: str) -> None:
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
            "models_problem": self.models_problem,  # why the last fetch failed, or None
            "hidden_models": self.hidden_models,
            "retries": self.retries,
            "model_capabilities": self.model_capabilities,
            "reasoning_policy": self.reasoning_policy,
            "enabled": self.enabled,
            "shared": self.user_id is None,
            "has_api_key": self.has_api_key,
        }
