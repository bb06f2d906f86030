"""What kind of request this is: an HTMX swap, a WebSocket upgrade, a bearer-token call.

One answer per question for every blueprint and guard of the web layer (STYLE: the
`HX-Request` header, not a query flag, decides fragment versus page).
"""

from __future__ import annotations

from flask import request

from .. import identity


def is_htmx() -> bool:
    """Whether HTMX sent this request (answer a fragment, not the whole page)."""
    return bool(request.headers.get("HX-Request"))


def is_websocket_upgrade() -> bool:
    """Whether this request asks to become a WebSocket."""
    return request.headers.get("Upgrade", "").lower() == "websocket"


def bearer_token() -> str | None:
    """The bearer token this request carries in its Authorization header, if any."""
    return identity.bearer_token(request.headers.get("Authorization", ""))
