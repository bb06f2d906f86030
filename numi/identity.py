"""Who a caller is, below the web layer: the local user, API tokens and bearer headers.

The web guards (`numi.web.security`, `numi.web.access`) and the command line (`numi user
token`) share these; none of them reads Flask's request globals, so `numi.cli` can make a
token without importing the web layer.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select

from .extensions import db
from .services import services
from .models import ApiToken, User, utcnow

LOCAL_USERNAME = "local"


def bearer_token(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, or None for any other."""
    if authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def local_user() -> User:
    """The single-user mode's user, created (as admin) on first use."""
    state = services()
    user_id = state.local_user_id
    user = db.session.get(User, user_id) if user_id else None
    if user is None:
        user = db.session.execute(
            select(User).where(User.username == LOCAL_USERNAME)
        ).scalar_one_or_none()
        if user is None:
            user = User(username=LOCAL_USERNAME, is_admin=True)
            db.session.add(user)
            db.session.commit()
        state.local_user_id = user.id
    return user


def hash_token(token: str) -> str:
    """The stored form of an API token (sha256 hex): a token is shown once and never kept."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh API token, `numi_` and 32 random bytes."""
    return "numi_" + secrets.token_urlsafe(32)


def token_name(token: str) -> str | None:
    """The name its owner gave an API token (None for any other token, e.g. single-user
    mode's access token)."""
    return db.session.execute(
        select(ApiToken.name).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()


def user_for_token(token: str) -> User | None:
    """The owner of an unrevoked API token, or None; notes when the token was last used."""
    row = db.session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()
    if row is None:
        return None
    now = utcnow()
    # Recorded at most once a minute: a write per API call would contend for SQLite's one writer.
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
        row.last_used_at = now
        db.session.commit()
    return db.session.get(User, row.user_id)
