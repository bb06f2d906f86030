"""What kind of request this is: an HTMX swap, a WebSocket upgrade, a bearer-token call,
and what it says of its sender (the client, the time zone).

One answer per question for every blueprint and guard of the web layer (STYLE: the
`HX-Request` header, not a query flag, decides fragment versus page).
"""

from __future__ import annotations

from typing import Any

from flask import request

from .. import identity


def is_htmx() -> bool:
    """Whether HTMX sent this request (answer a fragment, not the whole page)."""
    return bool(request.headers.get("HX-Request"))


def is_websocket_upgrade() -> bool:
    """Whether this request asks to become a WebSocket."""
    return request.headers.get("Upgrade", "").lower() == "websocket"


def request_client(via: str) -> dict[str, Any]:
    """Who sends a question, kept with it (chat.request_meta): the page (a session) or a
    program (a bearer token; an API token's name when it is one), and `via` what
    (websocket, chat_stream, form)."""
    token = bearer_token()
    if token is None:
        return {"kind": "page", "via": via}
    client: dict[str, Any] = {"kind": "api", "via": via}
    name = identity.token_name(token)
    if name is not None:
        client["api_key"] = name
    return client


def bearer_token() -> str | None:
    """The bearer token this request carries in its Authorization header, if any."""
    return identity.bearer_token(request.headers.get("Authorization", ""))


def request_timezone(payload: dict[str, Any]) -> dict[str, Any]:
    """The user's time zone from the IANA timezone header or X-Tz-Offset, unless given."""
    payload = dict(payload)
    payload.setdefault(
        "timezone", request.headers.get("X-Timezone") or request.headers.get("Timezone")
    )
    payload.setdefault("tz_offset", request.headers.get("X-Tz-Offset"))
    return payload
