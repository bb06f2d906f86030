"""What the service worker may keep for offline reading, and for whom (static/sw.js).

The worker keeps visited chat pages so they open offline. A browser profile can be shared:
one person logs out elsewhere, their session expires, another person signs in. So the
pages it keeps belong to one session, named by its *page key*:

- a random, non-secret id kept in the session cookie, made on the first page after a
  sign-in (every sign-in starts a new session: `session.clear()`), so a new sign-in of
  anyone, the same person included, has a new key;
- sent on every response as the `Numi-Page-Key` header, and as the `numi_page_key` cookie
  (readable by the worker through `cookieStore`, not HttpOnly: it opens nothing, the
  session cookie does), which expires with the session cookie and is deleted once the
  session has ended (logout, or a request the session no longer signs in).

The worker drops every kept page when a page comes without a key or with another key
(a redirect to the login page, the token form, another person's page), and offline it
serves a kept page only while the browser's cookie still names the key it was kept under.

A temporary chat is kept nowhere: its pages are `Cache-Control: no-store`
(numi/web/temporary.py), which the worker (and the browser's own cache, back/forward
included) honours.
"""

from __future__ import annotations

import secrets

from flask import Flask, Response, current_app, g, request, session

from .access import SESSION_KEY as ACCESS_KEY
from .request_kind import bearer_token, is_htmx, is_websocket_upgrade

PAGE_KEY_HEADER = "Numi-Page-Key"
PAGE_KEY_COOKIE = "numi_page_key"
SESSION_KEY = "page_key"
# Requests that say nothing about the session: the browser fetches them with or without one.
_SILENT_ENDPOINTS = {
    "static",
    "pages.healthz",
    "installable.service_worker",
    "installable.manifest",
}


def init_app(app: Flask) -> None:
    """Label every response with the page key of the browser's session (or its absence)."""
    app.after_request(_label)


def _signed_in_by_session() -> bool:
    """Whether this request's user comes from the browser's session cookie."""
    if g.get("user") is None:
        return False
    if current_app.config["NUMI_AUTH"] == "none":
        return True

    # Read after the view: a logout has cleared the session by now.
    return session.get("user_id") is not None or session.get(ACCESS_KEY) is not None


def _label(response: Response) -> Response:
    # A program's token (a bearer header, a `?token=` of one request) says nothing about
    # the browser's session either; a WebSocket's answer is no page.
    if (
        request.endpoint in _SILENT_ENDPOINTS
        or bearer_token() is not None
        or "token" in request.args
        or is_websocket_upgrade()
    ):
        return response
    key = (
        session.setdefault(SESSION_KEY, secrets.token_urlsafe(12))
        if _signed_in_by_session()
        else None
    )
    if key is None:
        if PAGE_KEY_COOKIE in request.cookies:
            response.delete_cookie(PAGE_KEY_COOKIE, samesite="Lax")
        return response
    # On every response, not only pages: a download opened in a tab is a navigation too.
    response.headers[PAGE_KEY_HEADER] = key
    page = request.method == "GET" and response.mimetype == "text/html" and not is_htmx()
    if page or request.cookies.get(PAGE_KEY_COOKIE) != key:
        response.set_cookie(
            PAGE_KEY_COOKIE,
            key,
            expires=current_app.session_interface.get_expiration_time(current_app, session),
            samesite="Lax",
            secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")),
        )
    return response
