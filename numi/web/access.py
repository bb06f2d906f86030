"""Single-user mode's access token (DESIGN §7), as Jupyter does it, with one-time links.

Anything that reaches 127.0.0.1 (another local process, another OS user, a page that
rebinds DNS) could otherwise create a chat with bash and run commands as the server's
user. So every request shows the token once:

- `Authorization: Bearer <token>`: programs; nothing is remembered, no cookie is set.
- `?token=<token>` on an API, SSE or WebSocket route: this request only, no cookie.
- the link `numi serve` and `numi open` print, `/sign-in?code=<one-time code>`: a small page
  posts the code (a script submits the form, a button does without JavaScript) and the
  session cookie remembers the token. The code is good once (numi/sign_in_links.py): the
  browser's history keeps every URL it opened, so the access token itself is never put in
  a page's URL; a page visited with `?token=` gets the token form, not a cookie.
- the token form (`POST /token`): the token pasted by hand.
- the session cookie from then on. It holds a fingerprint of the token and of the local
  user's session version, not the token, so a new token (NUMI_ACCESS_TOKEN changed, the
  token file replaced) retires old cookies, and so does Sign out (`auth.logout`): it moves
  the version on, and a cookie copied before it no longer opens anything.

Without it, a page answers 401 with the token form; the API, SSE, HTMX requests and
WebSocket upgrades answer 401 `auth_required` (`auth_invalid` for a wrong token).
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode

from flask import Blueprint, current_app, g, redirect, render_template, request, session

from .. import sign_in_links
from ..errors import NumiError
from ..identity import local_user
from .auth import safe_next
from .errors import wants_json
from .request_kind import bearer_token, is_htmx, is_websocket_upgrade

bp = Blueprint("access", __name__)

SESSION_KEY = "access"
# Reachable without the token: the form that takes it and the one-time link's page and post
# (static files and /healthz are public for every mode, see security.PUBLIC_ENDPOINTS).
PUBLIC_ENDPOINTS = {"access.submit", "access.sign_in_page", "access.sign_in"}
WRONG = "That token is not right. Use the link `numi serve` printed, or run `numi open`."
SPENT = (
    "That sign-in link has been used already (each link works once). Run `numi open` for a "
    "new one, or paste the access token (`numi token show`) here."
)
TOKEN_IN_URL = (
    "Links with the access token in them no longer sign in: the browser would keep the token "
    "in its history. Use the link `numi serve` printed, run `numi open`, or paste it here."
)


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
    if shown is not None and _is_api_request():
        # Like a bearer header: this request only. A cookie set here would outlive the
        # program's use of the token (and any logout) in whatever stored it.
        if not _matches(shown):
            return _refuse(wrong=True)
        g.user = local_user()
        return None
    if _remembered():
        g.user = local_user()
        return None
    if public:
        return None
    if shown is not None:
        return _form(_without_token() if _is_page_visit() else "/", TOKEN_IN_URL)
    return _refuse(wrong=False)


@bp.get("/sign-in")
def sign_in_page():
    """The one-time link's page: a form that posts its code (sent by static/js/sign_in.js,
    or by its button without JavaScript). A stranger's GET spends nothing, so a link preview
    or a prefetch cannot use the link up."""
    target = _next_path(request.args.get("next"))
    code = (request.args.get("code") or "")[:200]
    if current_app.config["NUMI_AUTH"] != "single":
        return redirect(target)
    if _remembered():
        # Signed in already: the link still goes into this browser's history, so spend it.
        sign_in_links.spend(code, _token())
        return redirect(target)
    if not sign_in_links.is_usable(code, _token()):
        return _form(target, SPENT)
    response = current_app.make_response(render_template("sign_in.html", code=code, next=target))
    # Not `Referrer-Policy: no-referrer`: Chromium would then post the form with `Origin: null`,
    # which the Origin check refuses. The site-wide same-origin policy keeps the code in Numi.
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/sign-in")
def sign_in():
    """Spend the one-time code, remember the token in the session cookie, go on to `next`."""
    target = _next_path(request.form.get("next"))
    if current_app.config["NUMI_AUTH"] != "single":
        return redirect(target, 303)
    spent = sign_in_links.spend((request.form.get("code") or "")[:200], _token())
    if not spent and not _remembered():
        return _form(target, SPENT)
    _remember()
    return redirect(target, 303)


@bp.post("/token")
def submit():
    """The token form: remember the token in the session cookie and go on to `next`."""
    target = (request.form.get("next") or "/")[:2000]
    if not _matches(request.form.get("token") or ""):
        return _form(target, WRONG)
    _remember()
    return redirect(safe_next(target))


def _token() -> str:
    return current_app.config["NUMI_ACCESS_TOKEN"] or ""


def _next_path(target: str | None) -> str:
    return safe_next((target or "/")[:2000])


def _matches(given: str) -> bool:
    expected = _token()
    # Constant time: how long a comparison takes must not reveal how much of a guess was right.
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _fingerprint() -> str:
    token = current_app.config["NUMI_ACCESS_TOKEN"] or ""
    # The session version is the local user's, in the database: a logout in one process
    # retires the cookie in every process of the deployment.
    version = local_user().session_version
    return hashlib.sha256(f"numi-access-token:{version}:".encode() + token.encode()).hexdigest()


def _remember() -> None:
    session.clear()  # a sign-in starts a new session (a new page key: offline_pages.py)
    session[SESSION_KEY] = _fingerprint()
    session.permanent = True


def _remembered() -> bool:
    stored = session.get(SESSION_KEY)
    return isinstance(stored, str) and hmac.compare_digest(stored.encode(), _fingerprint().encode())


def _is_api_request() -> bool:
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
