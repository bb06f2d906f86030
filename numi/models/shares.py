"""The table of share links (issue 42): a read-only snapshot of one chat at an unguessable URL.

Only the SHA-256 of a link's token is stored, so the table (or a backup of it) opens no
page. The snapshot is the transcript as it was when shared, kept as plain text fields in a
JSON column and rendered on every visit by the chat page's one markdown renderer, so a
later fix of the sanitizer covers old links too. `audience` is "anyone" (whoever holds the
link) or "signed_in" (users signed in to this Numi). Revoking sets `revoked_at`; the row is
kept so the owner's list can say so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, json_property, utcnow

AUDIENCES = ("anyone", "signed_in")


class Share(db.Model):
    __tablename__ = "shares"
    # Its id is in URLs (DELETE /api/shares/<id>): never handed out twice.
    __table_args__ = (IDS_NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    chat_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("chats.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(500))
    display_name: Mapped[str] = mapped_column(String(100))
    audience: Mapped[str] = mapped_column(String(16), default="anyone")
    snapshot_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    snapshot = json_property("snapshot_json", list)

    def is_open(self, now: datetime) -> bool:
        """Neither revoked nor expired at `now`."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def to_dict(self, now: datetime) -> dict[str, Any]:
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "title": self.title,
            "display_name": self.display_name,
            "audience": self.audience,
            "messages": len(self.snapshot),
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "revoked_at": iso(self.revoked_at),
            "open": self.is_open(now),
        }
