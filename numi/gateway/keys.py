"""API keys for /v1: made, listed, revoked, and checked on every gateway request.

A key is `numi-sk-` and 32 random bytes, shown once; only its sha256 is stored (the
prefix beside it is for telling keys apart). A key opens /v1 only: it is a different
secret from the access token and the API tokens of /api, and none of those opens /v1.
A revoked key stops at once (every request reads its row). Requests per minute are
limited per key by a `MinuteWindow`, per process (each process of a scale-out counts
its own share).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, select, update

from ..errors import NotFound, invalid
from ..extensions import db
from ..models import ApiKey, Endpoint, Project, utcnow
from ..models.columns import loads
from .errors import GatewayError
from ..endpoints import visible

KEY_PREFIX = "numi-sk-"
MAX_NAME = 100
# What a key may be used for (its `uses` scope): `chat` asks models (/v1, and the MCP
# server's `ask`), `history` reads and searches the user's chats, `documents` searches
# the user's documents, `web` searches the web with the user's search settings (these
# three through /mcp), `mcp` opens the MCP server at all.
USES = ("chat", "history", "documents", "web", "mcp")
# A key made before uses existed, or made without naming them, opens /v1 only.
DEFAULT_USES = ("chat",)


def hash_key(secret: str) -> str:
    """The stored form of a key (sha256 hex)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(
    user_id: int,
    name: Any,
    *,
    endpoints: Any = None,
    projects: Any = None,
    keep: Any = True,
    uses: Any = None,
) -> tuple[ApiKey, str]:
    """A new key for `user_id` and its secret (shown once, never stored). `endpoints` and
    `projects` are lists of ids the key may use (None: all); `keep` keeps its chats;
    `uses` is what it may do, a list of USES (None: DEFAULT_USES)."""
    if not isinstance(name, str) or not name.strip():
        raise invalid("Give the key a name (e.g. Zed, laptop script).", "invalid_key_name")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise invalid(f"A key's name has at most {MAX_NAME} characters.", "invalid_key_name")
    if not isinstance(keep, bool):
        raise invalid("keep must be true or false.", "invalid_key_scope")
    scopes = {
        "endpoints": _owned_ids(user_id, endpoints, Endpoint, "endpoints"),
        "projects": _owned_ids(user_id, projects, Project, "projects"),
        "uses": checked_uses(uses),
    }
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        user_id=user_id,
        name=name,
        prefix=secret[: len(KEY_PREFIX) + 4],
        key_hash=hash_key(secret),
        keep=keep,
    )
    key.scopes = {k: v for k, v in scopes.items() if v is not None}
    db.session.add(key)
    db.session.commit()
    return key, secret


def _owned_ids(user_id: int, value: Any, model: Any, what: str) -> list[int] | None:
    """The ids of a scope, each one of the user's (or a shared endpoint); None for all."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise invalid(f"{what} must be a list of ids, or null for all.", "invalid_key_scope")
    ids = sorted(set(value))
    if not ids:
        return ids
    if model is Endpoint:
        found = db.session.execute(
            select(Endpoint.id).where(Endpoint.id.in_(ids), *visible(user_id))
        )
    else:
        found = db.session.execute(
            select(Project.id).where(Project.id.in_(ids), Project.user_id == user_id)
        )
    if set(found.scalars()) != set(ids):
        raise invalid(f"No such {what[:-1]} among {ids}.", "invalid_key_scope")
    return ids


def checked_uses(value: Any) -> list[str]:
    """A key's `uses`, checked: a list of USES, in USES' order (None: DEFAULT_USES)."""
    if value is None:
        return list(DEFAULT_USES)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"uses must be a list of {', '.join(USES)}.", "invalid_key_scope")
    if not value:
        raise invalid(f"Give the key at least one use: {', '.join(USES)}.", "invalid_key_scope")
    unknown = sorted(set(value) - set(USES))
    if unknown:
        raise invalid(
            f"No such use {unknown[0]!r}: a key may be used for {', '.join(USES)}.",
            "invalid_key_scope",
        )
    return [use for use in USES if use in value]


def key_uses(scopes: dict[str, Any]) -> list[str]:
    """What a key's stored scopes let it do (a key made before uses existed: /v1)."""
    uses = scopes.get("uses")
    return list(DEFAULT_USES) if not isinstance(uses, list) else uses


def list_keys(user_id: int) -> list[ApiKey]:
    """The user's keys, revoked ones included (their usage stays), newest first."""
    return list(
        db.session.execute(
            select(ApiKey).where(ApiKey.user_id == user_id).order_by(ApiKey.id.desc())
        ).scalars()
    )


def get_key(user_id: int, key_id: Any) -> ApiKey:
    """One of the user's keys, or NotFound."""
    key = db.session.get(ApiKey, key_id) if isinstance(key_id, int) else None
    if key is None or key.user_id != user_id:
        raise NotFound("API key")
    return key


def revoke_key(user_id: int, key_id: Any) -> ApiKey:
    """Revoke a key now: its next request is refused (every request reads the row)."""
    key = get_key(user_id, key_id)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        db.session.commit()
    return key


@dataclass(frozen=True)
class Grant:
    """What a checked key allows, as plain values: the request ends its database
    transaction before the provider streams, and these outlive it."""

    id: int
    user_id: int
    name: str
    keep: bool
    scopes: dict[str, Any]


# Built once: every /v1 and /mcp request reads its key's row with it (plain columns, no
# ORM object to load, track and expire).
_KEY_BY_HASH = select(
    ApiKey.id,
    ApiKey.user_id,
    ApiKey.name,
    ApiKey.keep,
    ApiKey.scopes_json,
    ApiKey.last_used_at,
    ApiKey.revoked_at,
).where(ApiKey.key_hash == bindparam("key_hash"))
_MARK_USED = (
    update(ApiKey)
    .where(ApiKey.id == bindparam("key_id"))
    .values(last_used_at=bindparam("now"))
    .execution_options(synchronize_session=False)
)


def authenticate(secret: str | None) -> Grant:
    """What a secret given on a /v1 request allows, or a GatewayError (401). The key's row
    is read on every request, so a revoked key stops at once."""
    if not secret:
        raise GatewayError(
            "api_key_missing",
            "Send a Numi API key as `Authorization: Bearer <key>` (or `x-api-key`). "
            "Make one in Settings → API keys.",
            401,
        )
    row = None
    if secret.startswith(KEY_PREFIX):
        row = db.session.execute(_KEY_BY_HASH, {"key_hash": hash_key(secret)}).first()
    if row is None or row.revoked_at is not None:
        raise GatewayError("api_key_invalid", "This API key is not valid, or it was revoked.", 401)
    now = utcnow()
    # At most once a minute: a write per call would contend for SQLite's one writer.
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
        db.session.execute(_MARK_USED, {"key_id": row.id, "now": now})
    grant = Grant(row.id, row.user_id, row.name, row.keep, loads(row.scopes_json, {}))
    db.session.commit()
    return grant


def allows_use(key: Grant, use: str) -> bool:
    return use in key_uses(key.scopes)


def require_use(key: Grant, use: str, what: str) -> None:
    """Refuse (`api_key_scope`, 403) what the key's uses leave out; `what` names it."""
    if not allows_use(key, use):
        raise GatewayError(
            "api_key_scope",
            f"This key may not {what}: give it the scope {use!r} (Settings → API keys), "
            "or use a key that has it.",
            403,
        )


def allows_endpoint(key: Grant, endpoint_id: int) -> bool:
    allowed = key.scopes.get("endpoints")
    return allowed is None or endpoint_id in allowed


def allows_project(key: Grant, project_id: int) -> bool:
    allowed = key.scopes.get("projects")
    return allowed is None or project_id in allowed


@dataclass
class MinuteWindow:
    """Requests per minute per key, as a sliding window of the last minute's times."""

    limit: int
    seen: dict[int, deque[float]] = field(default_factory=dict)

    def admit(self, key_id: int, now: float | None = None) -> None:
        """Count one request of `key_id`, or raise `api_rate_limited` (429) with the
        seconds until the oldest request of the window leaves it."""
        if self.limit <= 0:
            return
        now = time.monotonic() if now is None else now
        times = self.seen.setdefault(key_id, deque())
        while times and times[0] <= now - 60.0:
            times.popleft()
        if len(times) >= self.limit:
            wait = max(1, math.ceil(times[0] + 60.0 - now))
            raise GatewayError(
                "api_rate_limited",
                f"This key may send {self.limit} requests a minute; try again in {wait} s.",
                429,
                retry_after=wait,
            )
        times.append(now)
