"""Login and logout for multi-user mode (single-user mode has neither: access.py)."""

from __future__ import annotations

from flask import Blueprint, current_app, redirect, render_template, request, session, url_for
from sqlalchemy import select
from werkzeug.security import check_password_hash

from ..extensions import db
from ..models import User

bp = Blueprint("auth", __name__)

# Compared against when the user does not exist, so timing does not reveal usernames.
_DUMMY_HASH = "scrypt:32768:8:1$invalid$" + "0" * 128


@bp.route("/login", methods=["GET", "POST"])
def login():
    if current_app.config["NUMI_AUTH"] != "multi":
        return redirect(url_for("pages.index"))
    error = None
    if request.method == "POST":
        username = (request.form.get("username") or "")[:100]
        password = (request.form.get("password") or "")[:1000]
        user = db.session.execute(select(User).where(User.username == username)).scalar_one_or_none()
        hashed = user.password_hash if user and user.password_hash else _DUMMY_HASH
        if check_password_hash(hashed, password) and user is not None:
            session.clear()
            session["user_id"] = user.id
            session.permanent = True
            return redirect(_safe_next(request.args.get("next")))
        error = "Wrong username or password."
    return render_template("login.html", error=error), 401 if error else 200


@bp.post("/logout")
def logout():
    session.clear()
    return redirect(url_for("auth.login"))


def _safe_next(target: str | None) -> str:
    # Only same-site paths: never redirect to another host after login.
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("pages.index")
