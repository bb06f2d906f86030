"""Single-user mode's access token (DESIGN §7), as Jupyter does it.

Anything that reaches 127.0.0.1 (another local process, another OS user, a page that
rebinds DNS) could otherwise create a chat with bash and run commands as the server's
user. So every request shows the token once:

- `Authorization: Bearer <token>`: programs; nothing is remembered, no cookie is set.
- `?token=<token>` on an API, SSE or WebSocket route: this request only, no cookie.
- `?token=<token>` on a page (the URL `numi serve` prints) or the token form: the session
  cookie remembers it; a page visited with ?token= is redirected to itself without the token,
  so it does not linger in history, logs or Referer headers.
- the session cookie from then on. It holds a fingerprint of the token, not the token,
  so a new token (NUMI_ACCESS_TOKEN changed, the token file replaced) retires old cookies.

Without it, a page answers 401 with the token form; the API, SSE, HTMX requests and
WebSocket upgrades answer 401 `auth_required` (`auth_invalid` for a wrong token).
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode

from flask import Blueprint, current_app, g, redirect, render_template, request, session

from ..errors import NumiError
from ..identity import local_user
from .request_kind import bearer_token, is_htmx, is_websocket_upgrade

bp = Blueprint("access", __name__)

SESSION_KEY = "access"
# Reachable without the token: the form that takes it (static files and /healthz are
# public for every mode, see security.PUBLIC_ENDPOINTS).
FORM_ENDPOINT = "access.submit"
WRONG = "That token is not right. Use the link `numi serve` printed, or run `numi open`."


def authorize(public: bool):
    """Let this request in as the local user, or refuse it. Returns a response or None.

    `public` requests (health check, the token form) pass without the token.
    """
    bearer = bearer_token()
    if bearer is not None:
        if not _matches(bearer):
            raise NumiError("auth_invalid", "Wrong access token.", 401)
        g.user = local_user()
        return None
    shown = request.args.get("token")
    if shown is not None:
        if not _matches(shown):
            return _refuse(wrong=True)
        g.user = local_user()
        if _is_api_request():
            # Like a bearer header: this request only. A cookie set here would outlive the
            # program's use of the token (and any logout) in whatever stored it.
            return None
        _remember()
        if _is_page_visit():
            return redirect(_without_token())
        return None
    if _remembered():
        g.user = local_user()
        return None
    if public:
        return None
    return _refuse(wrong=False)


@bp.post("/token")
def submit():
    """The token form: remember the token in the session cookie and go on to `next`."""
    from .auth import safe_next

    target = (request.form.get("next") or "/")[:2000]
    if not _matches(request.form.get("token") or ""):
        return _form(target, WRONG)
    _remember()
    return redirect(safe_next(target))


def _matches(given: str) -> bool:
    expected = current_app.config["NUMI_ACCESS_TOKEN"] or ""
    # Constant time: how long a comparison takes must not reveal how much of a guess was right.
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _fingerprint() -> str:
    token = current_app.config["NUMI_ACCESS_TOKEN"] or ""
    return hashlib.sha256(b"numi-access-token:" + token.encode()).hexdigest()


def _remember() -> None:
    session[SESSION_KEY] = _fingerprint()
    session.permanent = True


def _remembered() -> bool:
    stored = session.get(SESSION_KEY)
    return isinstance(stored, str) and hmac.compare_digest(stored.encode(), _fingerprint().encode())


def _is_api_request() -> bool:
    from .errors import wants_json

    return (
        request.path.startswith(("/api/", "/ws/"))
        or is_htmx()
        or is_websocket_upgrade()
        or wants_json()
    )


def _is_page_visit() -> bool:
    return request.method in ("GET", "HEAD") and not _is_api_request()


def _without_token() -> str:
    kept = [(key, value) for key, value in request.args.items(multi=True) if key != "token"]
    return request.path + ("?" + urlencode(kept) if kept else "")


def _refuse(*, wrong: bool):
    message = "Wrong access token." if wrong else "This Numi needs its access token."
    if _is_api_request():
        raise NumiError("auth_invalid" if wrong else "auth_required", message, 401)
    target = _without_token() if request.method in ("GET", "HEAD") else "/"
    return _form(target, WRONG if wrong else None)


def _form(target: str, error: str | None):
    return render_template("token.html", next=target, error=error), 401
