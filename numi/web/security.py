"""Request guards: Host (DNS rebinding), Origin (CSRF and cross-site WebSocket hijacking),
who the user is (local user with the access token, session cookie or bearer token), and the
security headers.

Rules (DESIGN §7):
- Every request's Host must be the bound host, localhost, or one of NUMI_ALLOWED_HOSTS.
- A state-changing request or WebSocket upgrade that carries a foreign Origin (or
  `Sec-Fetch-Site: cross-site`) is refused. Requests without an Origin come from programs,
  not browsers (browsers always send Origin on cross-site writes), and are allowed.
- Bearer-token requests carry no ambient credentials, so they skip the Origin check (API
  tokens of multi-user mode; single-user mode's access token keeps it, as a second fence).
- Single-user mode needs the access token once per browser (access.py); NUMI_AUTH=none
  lets every request in as the local user.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, current_app, g, redirect, request, url_for

from ..errors import NumiError
from ..identity import local_user, user_for_token
from . import access
from .auth import session_user
from .request_kind import bearer_token, is_htmx, is_websocket_upgrade

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
WILDCARD_BINDS = {"0.0.0.0", "::", ""}
DEFAULT_PORTS = {"http": 80, "https": 443}
# The artifact frame carries no data (web/artifacts.py): public like a static file.
PUBLIC_ENDPOINTS = {
    "auth.login",
    "static",
    "pages.healthz",
    "artifacts.frame",
    # A shared chat: its token is the key; it checks its own audience (web/shares.py).
    "shares.shared_page",
    "shares.shared_artifact",
    *access.PUBLIC_ENDPOINTS,
    # The installable page's manifest and worker: browsers fetch them without credentials.
    "installable.manifest",
    "installable.service_worker",
}

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; media-src 'self' blob:; object-src 'none'; "
    "base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# Settings opens over the chat in a frame of the page's own origin (static/js/settings_overlay.js);
# every other page still refuses to be framed.
SETTINGS_CSP = CSP.replace("frame-ancestors 'none'", "frame-ancestors 'self'")


def init_app(app: Flask) -> None:
    app.before_request(_check_host)
    app.before_request(_identify)
    app.before_request(_check_origin)
    app.after_request(_security_headers)


def allowed_hosts(config) -> set[str]:
    hosts = {"localhost", "127.0.0.1", "::1"}
    bind = config["NUMI_HOST"]
    if bind not in WILDCARD_BINDS:
        hosts.add(bind.lower())
    hosts.update(config["NUMI_ALLOWED_HOSTS"])
    return hosts


def _hostname(host_header: str) -> str:
    return (urlsplit("//" + host_header).hostname or "").lower()


def _check_host():
    allowed = allowed_hosts(current_app.config)
    if "*" in allowed:
        return None
    if _hostname(request.host) not in allowed:
        raise NumiError(
            "bad_host", "This host name is not allowed. Add it to NUMI_ALLOWED_HOSTS.", 400
        )
    return None


def same_origin(origin: str, host_header: str, scheme: str = "http") -> bool:
    """Whether a browser Origin names this server as reached through `host_header` over
    `scheme` (the request's, which ProxyFix sets from `X-Forwarded-Proto` behind a trusted
    proxy).

    The schemes must agree: an `http://` page is another origin than an `https://` one on
    the same host, and one a network attacker can write into. The one exception is an
    https Origin on a request the app sees as http: a proxy that ends TLS without saying so.
    A Host without a port means its scheme's default port (RFC 9110 §7.2: a browser sends
    the port whenever it is not the default), so it matches only an Origin on the default
    port of the Origin's own scheme. A page of another service on another port of the same
    host name is another origin.
    """
    if origin == "null":
        return False
    parts = urlsplit(origin)
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    if parts.scheme != scheme and (parts.scheme, scheme) != ("https", "http"):
        return False
    host = urlsplit("//" + host_header)
    default_port = DEFAULT_PORTS.get(parts.scheme)
    try:
        origin_port = parts.port or default_port
        host_port = host.port or default_port
    except ValueError:
        return False
    if origin_port is None or (parts.hostname or "").lower() != (host.hostname or "").lower():
        return False
    return host_port == origin_port


# The blueprints an API key opens, and nothing else does.
KEY_BLUEPRINTS = ("gateway", "mcp_server")


def _check_origin():
    if g.get("via_token") or request.blueprint in KEY_BLUEPRINTS:
        # /v1 and /mcp take no cookie: only their own key, never sent by a browser on its
        # own (/mcp checks a browser's Origin itself, as its transport asks).
        return None
    if request.method in SAFE_METHODS and not is_websocket_upgrade():
        return None
    origin = request.headers.get("Origin")
    if origin is not None and not same_origin(origin, request.host, request.scheme):
        raise NumiError("bad_origin", "Cross-site request refused.", 403)
    elif request.headers.get("Sec-Fetch-Site") == "cross-site":
        raise NumiError("bad_origin", "Cross-site request refused.", 403)
    return None


def _identify():
    g.user = None
    g.via_token = False
    # The health check reads no user: it must answer (503) while the database is down.
    if request.endpoint in ("static", "pages.healthz"):
        return None
    # /v1 and /mcp are opened by an API key only (web/gateway.py, web/mcp_server.py), never
    # by a session or token.
    if request.blueprint in KEY_BLUEPRINTS:
        return None
    mode = current_app.config["NUMI_AUTH"]
    if mode == "none":
        g.user = local_user()
        return None
    if mode == "single":
        return access.authorize(public=request.endpoint in PUBLIC_ENDPOINTS)
    token = bearer_token()
    if token is not None:
        user = user_for_token(token)
        if user is None:
            raise NumiError("auth_invalid", "Invalid or revoked API token.", 401)
        g.user, g.via_token = user, True
        return None

    g.user = session_user()
    if g.user is None and request.endpoint not in PUBLIC_ENDPOINTS:
        if request.path.startswith(("/api/", "/ws/")) or is_htmx():
            raise NumiError("auth_required", "Log in first.", 401)
        return redirect(
            url_for("auth.login", next=request.full_path if request.query_string else request.path)
        )
    return None


# What is not a document: stylesheets and scripts get no document headers (a first load
# carried them on each; sw.js, a worker, is not a static file and keeps them).
NOT_DOCUMENTS = ("text/css", "text/javascript")


def _security_headers(response):
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if request.endpoint == "static" and response.mimetype in NOT_DOCUMENTS:
        return response
    framed = request.path.startswith("/settings")
    response.headers.setdefault("Content-Security-Policy", SETTINGS_CSP if framed else CSP)
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "SAMEORIGIN" if framed else "DENY")
    if framed:
        # The page drawn for the overlay's frame differs from the page itself (settings.html).
        response.vary.add("Sec-Fetch-Dest")
    if is_htmx():
        # A fragment and the full page share a URL: keep caches from mixing them up.
        response.vary.add("HX-Request")
    return response
