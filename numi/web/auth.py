"""Logins, logouts and passwords for multi-user mode (single-user mode has none: access.py).

A login puts the user's id and `session_version` into the session cookie; every request
checks the version (security.py). Logout, "Log out everywhere" and a password change raise
the version, so every cookie issued before stops working: Flask's cookies live in the
browser, and this is how the server takes them back.

Password checks run through the login throttle (numi/login_limits.py), which reserves the
attempt before the hash, and the hashing pool (numi/passwords.py), whose queue admits the
address and account that asked least lately first. At most MAX_CHECKS_PER_ACCOUNT checks of
one account from one address, and MAX_CHECKS_PER_ADDRESS in all, wait or run at once in a
process: a guesser holds a bounded number of places in the queue, and a first login from
the guesser's own address (a NAT, a proxy) for another account still gets one. A good login leaves a signed
device cookie: that browser stays outside the username-wide limit and is hashed in a lane
of its own.
"""

from __future__ import annotations

import math
from urllib.parse import unquote, urlsplit

from flask import (
    Blueprint,
    current_app,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import select, update

from ..errors import NotFound
from ..extensions import db
from ..services import services
from ..login_limits import LoginThrottle
from ..models import User
from ..passwords import check_password, hash_password
from .inputs import request_data
from .pages.settings import settings_page
from .request_kind import is_htmx

bp = Blueprint("auth", __name__)

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1000
# Password checks waiting or running at once in one process, of one account from one client
# address and of any account from it; more are refused before hashing. The queue's order
# keeps guessers from delaying others: these bound only what one address holds in it, and
# are wide enough that a guessing loop waits its turn instead of spinning on refusals (20
# loops answered 429 at once kept the server busy and a first login waited 18 s for it).
MAX_CHECKS_PER_ACCOUNT = 24
MAX_CHECKS_PER_ADDRESS = 64
DEVICE_COOKIE = "numi_device"
DEVICE_MAX_AGE_SECONDS = 365 * 24 * 3600


def login_throttle() -> LoginThrottle:
    return services().login_throttle


def client_address() -> str:
    # With NUMI_TRUSTED_PROXIES, ProxyFix has already put the forwarded address here.
    return request.remote_addr or ""


@bp.route("/login", methods=["GET", "POST"])
def login():
    if current_app.config["NUMI_AUTH"] != "multi":
        return redirect(url_for("pages.index"))
    if request.method == "GET":
        return render_template("login.html", error=None)
    username = (request.form.get("username") or "")[:100]
    password = (request.form.get("password") or "")[:MAX_PASSWORD_CHARS]
    throttle, address = login_throttle(), client_address()
    user = db.session.execute(select(User).where(User.username == username)).scalar_one_or_none()
    user_id, stored = (user.id, user.password_hash) if user else (None, None)
    db.session.rollback()  # no transaction is held while the hash is computed
    known = user_id is not None and _device_user_id() == user_id
    checked = _checked_password(throttle, username, address, stored, password, known=known)
    if isinstance(checked, tuple) and not isinstance(checked[0], bool):
        return checked  # refused before hashing
    matches, new_hash = checked
    if not matches or user_id is None:
        # The username stays in its field: a retry is the password alone.
        page = render_template("login.html", error="Wrong username or password.", username=username)
        return page, 401
    throttle.succeeded(username, address)
    if new_hash:
        # Only if the hash is still the one checked: a password changed meanwhile stays.
        db.session.execute(
            update(User)
            .where(User.id == user_id, User.password_hash == stored)
            .values(password_hash=new_hash)
        )
        db.session.commit()
    user = db.session.get(User, user_id)
    _start_session(user)
    response = redirect(safe_next(request.args.get("next")))
    response.set_cookie(
        DEVICE_COOKIE,
        _device_serializer().dumps({"u": user_id}),
        max_age=DEVICE_MAX_AGE_SECONDS,
        httponly=True,
        samesite="Lax",
        secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")),
    )
    return response


def _checked_password(
    throttle: LoginThrottle,
    username: str,
    address: str,
    stored: str | None,
    password: str,
    *,
    known: bool = False,
    template: str | None = "login.html",
):
    """(matches, new_hash) of a password check, or the 429 response that refused it unchecked:
    too many checks from this address at once, or a login limit (the attempt is reserved
    before the hash, so guesses sent together are limited as if sent one by one)."""
    in_flight = services().hashes_in_flight
    slots = (address, (address, username.strip().lower()))
    busy = (
        in_flight[slots[0]] >= MAX_CHECKS_PER_ADDRESS
        or in_flight[slots[1]] >= MAX_CHECKS_PER_ACCOUNT
    )
    if busy and not known:
        return _too_many(
            1, template, "Another login from your address is being checked. Try again in a moment."
        )
    # Taken before the throttle's queries, which yield to other greenlets on PostgreSQL.
    in_flight.update(slots)
    try:
        wait = throttle.begin(username, address, known_device=known)
        if wait:
            return _too_many(wait, template)
        if known:
            return check_password(stored, password, lane="known")
        return check_password(stored, password, address=address, account=username)
    finally:
        in_flight.subtract(slots)
        for slot in slots:
            if in_flight[slot] <= 0:
                del in_flight[slot]


def _device_serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key, salt="numi.known-device")


def _device_user_id() -> int | None:
    """The user this browser logged in as before (the signed device cookie), if any."""
    value = request.cookies.get(DEVICE_COOKIE)
    if not value or len(value) > 200:
        return None
    try:
        data = _device_serializer().loads(value, max_age=DEVICE_MAX_AGE_SECONDS)
    except BadSignature:
        return None
    user_id = data.get("u") if isinstance(data, dict) else None
    return user_id if isinstance(user_id, int) else None


@bp.post("/logout")
def logout():
    if g.get("user") is not None and current_app.config["NUMI_AUTH"] == "multi":
        end_sessions(g.user.id)
    elif current_app.config["NUMI_AUTH"] == "single" and g.get("user") is not None:
        # The access cookie's fingerprint includes the local user's session version
        # (access.py): moving it on retires every copy of every browser's cookie.
        end_sessions(g.user.id)
    session.clear()
    return _signed_out(redirect(url_for("auth.login")))


def _signed_out(response):
    # The browser forgets what it kept of this user: the pages the service worker saved for
    # offline reading, the worker itself, drafts and the outbox (static/sw.js).
    response.headers["Clear-Site-Data"] = '"cache", "storage"'
    return response


@bp.post("/settings/logout-everywhere")
def logout_everywhere():
    """End every session of this user, in every browser, this one included."""
    _multi_user_only()
    end_sessions(g.user.id)
    session.clear()
    return _signed_out(redirect(url_for("auth.login")))


@bp.post("/settings/password")
def change_password():
    """Change the password (the current one is checked); every other session ends."""
    _multi_user_only()
    data = request_data()
    current = str(data.get("current_password") or "")[:MAX_PASSWORD_CHARS]
    new = str(data.get("new_password") or "")
    repeat = str(data.get("repeat_password") or "")
    problem = None
    if not MIN_PASSWORD_CHARS <= len(new) <= MAX_PASSWORD_CHARS:
        problem = f"A password has at least {MIN_PASSWORD_CHARS} characters (and at most {MAX_PASSWORD_CHARS})."
    elif new != repeat:
        problem = "The new passwords do not match."
    if problem:
        return _password_form(problem, 400)
    # The current password is guessed no faster here than at the login form.
    throttle, address, username = login_throttle(), client_address(), g.user.username
    user_id, stored = g.user.id, g.user.password_hash
    db.session.rollback()
    checked = _checked_password(throttle, username, address, stored, current, template=None)
    if isinstance(checked, tuple) and not isinstance(checked[0], bool):
        return checked  # refused before hashing
    matches, _ = checked
    if not matches:
        return _password_form("Your current password is not right.", 400)
    throttle.succeeded(username, address)
    new_hash = hash_password(new)
    changed = db.session.execute(
        update(User)
        .where(User.id == user_id, User.password_hash == stored)
        .values(password_hash=new_hash, session_version=User.session_version + 1)
    ).rowcount
    db.session.commit()
    if not changed:  # changed in another tab meanwhile: nothing is overwritten
        return _password_form(
            "Your password was changed elsewhere meanwhile. Reload and try again.", 409
        )
    # This browser stays signed in with the new version; every other cookie is retired.
    _start_session(db.session.get(User, user_id))
    if is_htmx():
        return render_template("partials/_password_form.html", saved=True)
    return redirect(url_for("pages.settings", section="account"))


def end_sessions(user_id: int) -> None:
    """Retire every session cookie of the user (logout, Log out everywhere)."""
    db.session.execute(
        update(User).where(User.id == user_id).values(session_version=User.session_version + 1)
    )
    db.session.commit()


def session_user() -> User | None:
    """The user the session cookie names, if its session version is still current."""
    user_id = session.get("user_id")
    if user_id is None:
        return None
    user = db.session.get(User, user_id) if isinstance(user_id, int) else None
    if user is None or session.get("session_version") != user.session_version:
        session.clear()  # logged out elsewhere, password changed, or the user is gone
        return None
    return user


def _start_session(user: User) -> None:
    session.clear()
    session["user_id"] = user.id
    session["session_version"] = user.session_version
    session.permanent = True


def _multi_user_only() -> None:
    if current_app.config["NUMI_AUTH"] != "multi" or g.get("user") is None:
        raise NotFound("page")


def _too_many(wait: int, template: str | None, message: str | None = None):
    """429 with Retry-After: the attempt was not checked and changed nothing."""
    message = message or "Too many failed logins. Try again in " + (
        f"{wait} seconds." if wait < 120 else f"{math.ceil(wait / 60)} minutes."
    )
    if template is None:
        body, status = _password_form(message, 429)
    else:
        body, status = render_template(template, error=message), 429
    return body, status, {"Retry-After": str(wait)}


def _password_form(error: str, status: int):
    if is_htmx():
        return render_template("partials/_password_form.html", error=error), status

    return settings_page("account", status, password_error=error)


def safe_next(target: str | None) -> str:
    """`target` if it is a path on this site, else the chat list: never a redirect elsewhere.

    A path has one leading slash, no backslash and no control character, also once
    percent-decoded: browsers drop tabs and newlines from URLs and read `\\` as `/`, so
    `/%09/evil.example` and `/\\evil.example` would both lead to evil.example.
    """
    fallback = url_for("pages.index")
    if not target or len(target) > 2000:
        return fallback
    decoded, previous = target, None
    while decoded != previous:  # until nothing is left to decode (double encoding too)
        previous, decoded = decoded, unquote(decoded)
    for text in (target, decoded):
        if not text.startswith("/") or text.startswith("//") or "\\" in text:
            return fallback
        if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u2028\u2029" for ch in text):
            return fallback
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return fallback
    return target
