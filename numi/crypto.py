"""Secrets at rest: endpoint API keys are sealed with AES-256-GCM before they are stored.

Stored form: `numi:v1:` + base64url(12-byte nonce + ciphertext + tag). The prefix marks
sealed values, so a value without it is legacy plaintext (still readable, and sealed by
the idempotent start-up step `seal_plaintext_keys`, run with every `upgrade`), and a later
scheme can be told apart by its version.

The key is derived (HKDF-SHA256) from the app's secret key, NUMI_SECRET_KEY (or the
`<data dir>/secret_key` file generated when it is unset), rather than kept in a key file
of its own, because:
- it is the one secret a deployment already keeps and shares: several processes (gunicorn
  workers, hosts behind a proxy) must share NUMI_SECRET_KEY or the data directory for
  sessions anyway, so they all read the keys with no extra set-up;
- set in the environment, it never lies beside the database: a copied numi.db or a
  PostgreSQL dump alone reveals no API key (and `bash` never sees the variable);
- a separate key file in the data directory would sit next to numi.db and protect less.
The price: changing NUMI_SECRET_KEY makes stored API keys unreadable (a clear
`endpoint_key_unreadable` error asks to enter them again); sessions are logged out by
other means, so there is no routine reason to change it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from urllib.parse import urlsplit

from flask import current_app
from sqlalchemy import text

from .errors import NumiError
from .extensions import db

log = logging.getLogger(__name__)

PREFIX = "numi:v1:"
_INFO = b"numi endpoint api keys v1"
_AAD = b"numi:endpoint.api_key"


class SecretUnreadable(NumiError):
    def __init__(self) -> None:
        super().__init__(
            "endpoint_key_unreadable",
            "The endpoint's API key cannot be read with this server's secret key "
            "(NUMI_SECRET_KEY changed?). Enter the API key again in Settings → Endpoints.",
            409,
        )


def _key(secret_key: str) -> bytes:
    from cryptography.hazmat.primitives import hashes  # lazy: start-up time
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # lazy: start-up time

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
        secret_key.encode()
    )


def _app_secret() -> str:
    return current_app.config["SECRET_KEY"]


def is_sealed(value: str | None) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(plaintext: str, secret_key: str | None = None) -> str:
    """The stored form of `plaintext` (a fresh random nonce each time)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # lazy: start-up time

    nonce = os.urandom(12)
    sealed = AESGCM(_key(secret_key or _app_secret())).encrypt(nonce, plaintext.encode(), _AAD)
    return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()


def unseal(value: str, secret_key: str | None = None) -> str:
    """The plaintext of a stored value; legacy plaintext comes back as it is. Raises
    SecretUnreadable when the value was sealed under another secret key (or damaged)."""
    if not is_sealed(value):
        return value
    from cryptography.exceptions import InvalidTag  # lazy: start-up time
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # lazy: start-up time

    try:
        raw = base64.urlsafe_b64decode(value[len(PREFIX) :].encode())
        return AESGCM(_key(secret_key or _app_secret())).decrypt(raw[:12], raw[12:], _AAD).decode()
    except (InvalidTag, ValueError):
        raise SecretUnreadable() from None


def url_has_credentials(url: str) -> bool:
    """Whether a URL carries what may be a secret: `user:pass@` or any query string (such
    as `?api-key=`). Such a base URL is stored sealed, whole."""
    parts = urlsplit(url or "")
    return bool(parts.username or parts.password or parts.query or "@" in parts.netloc)


def seal_url_credentials(url: str, secret_key: str | None = None) -> str:
    """The stored form of an endpoint's base URL: sealed when it has credentials in it,
    plain (searchable, readable in a database dump) when it has none."""
    if not url or is_sealed(url) or not url_has_credentials(url):
        return url
    return seal(url, secret_key)


def seal_plaintext_keys(app) -> int:
    """Seal every endpoint API key (and Brave Search key in the web tool settings) still
    stored as plaintext; returns how many. Idempotent, and safe when several processes
    start at once (each row is updated only while it still holds what was read)."""
    with app.app_context():
        try:
            rows = db.session.execute(
                text(
                    "SELECT id, api_key FROM endpoints WHERE api_key IS NOT NULL AND api_key <> '' "
                    "AND api_key NOT LIKE 'numi:v1:%'"
                )
            ).all()
            secret_key = app.config["SECRET_KEY"]
            for endpoint_id, plaintext in rows:
                db.session.execute(
                    text(
                        "UPDATE endpoints SET api_key = :sealed WHERE id = :id AND api_key = :old"
                    ),
                    {"sealed": seal(plaintext, secret_key), "id": endpoint_id, "old": plaintext},
                )
            rows += _seal_url_credentials(db, text, secret_key)
            rows += _seal_search_keys(db, text, secret_key)
            db.session.commit()
        finally:
            db.session.remove()
    if rows:
        log.info("sealed %d API key(s) stored as plaintext", len(rows))
    return len(rows)


def _seal_url_credentials(db, text, secret_key: str) -> list:
    """Endpoint base URLs stored before they were sealed that carry credentials."""
    rows = db.session.execute(
        text("SELECT id, base_url FROM endpoints WHERE base_url NOT LIKE 'numi:v1:%'")
    ).all()
    rows = [(endpoint_id, url) for endpoint_id, url in rows if url_has_credentials(url)]
    for endpoint_id, url in rows:
        db.session.execute(
            text("UPDATE endpoints SET base_url = :sealed WHERE id = :id AND base_url = :old"),
            {"sealed": seal(url, secret_key), "id": endpoint_id, "old": url},
        )
    return rows


def _seal_search_keys(db, text, secret_key: str) -> list:
    """The Brave Search keys inside `tool_settings.settings_json` (a few rows at most)."""
    rows = db.session.execute(
        text(
            "SELECT user_id, settings_json FROM tool_settings WHERE settings_json LIKE '%brave_api_key%'"
        )
    ).all()
    sealed = []
    for user_id, raw in rows:
        try:
            settings = json.loads(raw)
        except ValueError:
            continue
        key = settings.get("brave_api_key") if isinstance(settings, dict) else None
        if not isinstance(key, str) or not key or is_sealed(key):
            continue
        settings["brave_api_key"] = seal(key, secret_key)
        db.session.execute(
            text(
                "UPDATE tool_settings SET settings_json = :new WHERE user_id = :id "
                "AND settings_json = :old"
            ),
            {"new": json.dumps(settings), "id": user_id, "old": raw},
        )
        sealed.append(user_id)
    return sealed
