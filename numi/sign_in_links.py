"""Single-user mode's one-time sign-in links (issue 28 item 11).

The link `numi serve` and `numi open` print must open Numi in one click, so it carries a
secret; a browser keeps every URL it visits in its history database, whatever the page
does afterwards (a redirect or `history.replaceState` adds an entry, it removes none). So
the link carries no access token but a code of its own, good once: a random nonce and its
HMAC under the access token. Anyone who mints one already holds the token (the command line
reads it as the server does); the server checks the HMAC and spends the nonce in the
database, which every process shares. A code in the history is spent; a new access token
voids every code made with the old one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from sqlalchemy.exc import IntegrityError

from .extensions import db
from .models import SpentSignInLink

NONCE_CHARS = 16
MAC_CHARS = 27  # 160 bits of HMAC-SHA256, base64url


def new_code(access_token: str) -> str:
    """A fresh one-time sign-in code for a server whose access token is `access_token`."""
    nonce = secrets.token_urlsafe(12)  # 16 characters of [A-Za-z0-9_-]: never a "."
    return f"{nonce}.{_mac(access_token, nonce)}"


def is_usable(code: str, access_token: str) -> bool:
    """Whether `code` was made with this access token and has not been spent (a read only)."""
    nonce = _checked_nonce(code, access_token)
    return nonce is not None and db.session.get(SpentSignInLink, nonce) is None


def spend(code: str, access_token: str) -> bool:
    """Spend `code`: True the first time a code made with this access token is spent, False
    for a wrong code or a spent one (two requests racing for one code: one wins)."""
    nonce = _checked_nonce(code, access_token)
    if nonce is None:
        return False
    db.session.add(SpentSignInLink(nonce=nonce))
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        return False
    return True


def _mac(access_token: str, nonce: str) -> str:
    digest = hmac.new(
        access_token.encode(), b"numi-sign-in-link:" + nonce.encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).decode()[:MAC_CHARS]


def _checked_nonce(code: str, access_token: str) -> str | None:
    nonce, dot, mac = code.partition(".")
    if not access_token or not dot or len(nonce) != NONCE_CHARS or not nonce.isascii():
        return None
    # Constant time: how long the check takes must not tell how much of a guess was right.
    if not hmac.compare_digest(mac.encode(), _mac(access_token, nonce).encode()):
        return None
    return nonce
