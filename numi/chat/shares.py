"""Share links (issue 42): a read-only snapshot of a chat's shown branch at an unguessable URL.

`create_share` checks the owner (`get_chat`: another user's chat is the same 404 as a
missing one), freezes the transcript as it is now into plain text fields (the neutral
`ExportMessage` view the exports use: no HTML is stored), and answers the token once; only
its SHA-256 is kept. `open_share` finds an open link by its token: a wrong, revoked or
expired token is one and the same `NotFound`, so a visitor learns nothing about which.
`ShareGuesses` counts wrong tokens per client address in the login limits' store (database
or Redis) and refuses an address that keeps guessing.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from .. import endpoints as endpoint_store
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..login_limits import LoginStore
from ..models import AUDIENCES, Chat, Message, Share, utcnow
from .chats import get_chat
from .export import attachment_index, load_transcript, message_views

DISPLAY_NAME_MAX = 100
MAX_EXPIRY_DAYS = 3650
# The snapshot keeps what a reader of the chat page sees of each message; tool calls,
# sources and the request details stay behind (they may name files and machines).
SNAPSHOT_FIELDS = ("role", "label", "text", "reasoning", "model", "attachments", "created_at")


def token_hash(token: str) -> str:
    """What the table stores of a token: its SHA-256 (a token is 256 bits of randomness,
    so a fast hash is enough)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_share(user_id: int, chat_id: str, fields: dict[str, Any]) -> tuple[Share, str]:
    """Share the user's chat `chat_id` as it is now; answers the row and the token (shown
    only this once). `fields`: `display_name` (required), `audience` ("anyone" or
    "signed_in"), `expires_in_days` (optional, 1 to 3650)."""
    display_name = fields.get("display_name")
    if not isinstance(display_name, str) or not display_name.strip():
        raise invalid("Give the name the shared page shows as its author.", "share_invalid")
    display_name = display_name.strip()
    if len(display_name) > DISPLAY_NAME_MAX:
        raise invalid(
            f"The display name is longer than {DISPLAY_NAME_MAX} characters.", "share_invalid"
        )
    audience = fields.get("audience", "anyone")
    if audience not in AUDIENCES:
        raise invalid(f"Who may open it: one of {', '.join(AUDIENCES)}.", "share_invalid")
    expires_at = _expiry(fields.get("expires_in_days"))
    chat = get_chat(user_id, chat_id)
    if chat.temporary:
        raise invalid("A temporary chat cannot be shared; keep it first.", "share_invalid")
    messages = load_transcript(chat)
    views = message_views(messages, attachment_index(user_id, messages))
    snapshot = [
        {key: value for key, value in asdict(view).items() if key in SNAPSHOT_FIELDS}
        for view in views
        if view.role in ("user", "assistant") and (view.text or view.reasoning)
    ]
    if not snapshot:
        raise invalid("This chat has no messages to share yet.", "share_invalid")
    token = secrets.token_urlsafe(32)
    share = Share(
        user_id=user_id,
        chat_id=chat.id,
        token_hash=token_hash(token),
        title=chat.title or "Untitled chat",
        display_name=display_name,
        audience=audience,
        expires_at=expires_at,
    )
    share.snapshot = snapshot
    db.session.add(share)
    db.session.commit()
    return share, token


def _expiry(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_EXPIRY_DAYS:
        raise invalid(
            f"The expiry is a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or none.",
            "share_invalid",
        )
    return utcnow() + timedelta(days=value)


def list_shares(user_id: int) -> list[Share]:
    """The user's share links, newest first (revoked and expired ones too, marked so)."""
    stmt = select(Share).where(Share.user_id == user_id).order_by(Share.id.desc())
    return list(db.session.execute(stmt).scalars())


def revoke_share(user_id: int, share_id: Any) -> Share:
    """Close the user's link `share_id` at once (another user's is a 404); idempotent."""
    if not isinstance(share_id, int) or isinstance(share_id, bool):
        raise NotFound("share link")
    share = db.session.execute(
        select(Share).where(Share.id == share_id, Share.user_id == user_id)
    ).scalar_one_or_none()
    if share is None:
        raise NotFound("share link")
    if share.revoked_at is None:
        share.revoked_at = utcnow()
        db.session.commit()
    return share


def open_share(token: str) -> Share | None:
    """The open link whose token is `token`, or None (wrong, revoked and expired alike)."""
    if not token or len(token) > 100:
        return None
    share = db.session.execute(
        select(Share).where(Share.token_hash == token_hash(token))
    ).scalar_one_or_none()
    db.session.commit()  # no read transaction held while the page renders
    if share is None or not share.is_open(utcnow()):
        return None
    return share


def continue_share(user_id: int, share: Share) -> Chat:
    """ "Continue this chat": a new chat of the visitor's, holding the snapshot's messages
    (text and reasoning), on the visitor's own default route. Written in one transaction."""
    chat = Chat(user_id=user_id, title=share.title[:200])
    default = endpoint_store.default_route(user_id)
    if default:
        chat.endpoint_id, chat.model = default.id, endpoint_store.first_model(default)
    db.session.add(chat)
    db.session.flush()
    for item in share.snapshot:
        db.session.add(
            Message(
                chat_id=chat.id,
                role=item.get("role"),
                content=item.get("text") or "",
                reasoning_content=item.get("reasoning") or None,
            )
        )
        # Each row's parent is the branch tip the previous one became.
        db.session.flush()
    db.session.commit()
    return chat


class ShareGuesses:
    """Wrong share tokens per client address: the first `free` cost nothing; past them the
    address is refused for a time that doubles with each further wrong token, from `delay`
    up to `max_delay` seconds. Kept in the login limits' store, so every process counts
    alike and a day of quiet forgets them."""

    def __init__(self, store: LoginStore, clock, *, free: int, delay: float, max_delay: float):
        self.store = store
        self.clock = clock
        self.free = free
        self.delay = delay
        self.max_delay = max(delay, max_delay)

    def check(self, address: str) -> None:
        """Refuse (429 `share_guess_limit`) an address that is being held back."""
        now = self.clock()
        until = self.store.refused_until([self._key(address)])
        if until > now:
            raise NumiError(
                "share_guess_limit",
                f"Too many wrong share links; try again in {math.ceil(until - now)} s.",
                429,
            )

    def wrong(self, address: str) -> None:
        """Count one wrong token from `address`, and hold it back once past its free ones."""
        now = self.clock()
        key = self._key(address)
        count = self.store.count(key, 1, now)
        if count > self.free and self.delay > 0:
            wait = min(self.max_delay, self.delay * 2 ** min(count - self.free - 1, 60))
            self.store.claim(key, now + wait, now)

    @staticmethod
    def _key(address: str) -> str:
        return hashlib.sha256(f"share-guess\0{address}".encode()).hexdigest()
