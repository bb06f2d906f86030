"""Fallback chains: the user's default chain (Settings) and the editor's form handling.

    GET  /api/fallbacks        the user's default fallbacks: {fallbacks: [{endpoint_id, model}]}
    PUT  /api/fallbacks        replace them ({fallbacks: [...]}; validated, all or nothing)
    POST /settings/fallbacks   the Settings page's editor (row buttons re-render, Save saves)

A chat with no fallbacks of its own uses these (agent/routes.py). Validation is the chat
settings cleaner's (`chat.chats.validate_fallbacks`), so chats, Settings and projects
refuse the same things with the same codes.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, redirect, render_template, request, url_for

from .. import endpoints as endpoint_store
from ..chat.chats import MAX_FALLBACKS, validate_fallbacks
from ..errors import invalid
from ..extensions import db
from .inputs import request_data
from .request_kind import is_htmx

bp = Blueprint("fallbacks", __name__)


def editor_rows(form) -> tuple[list[dict[str, Any]], bool]:
    """The editor's rows from a submitted form, with a row button's action applied:
    (rows, True) when a button was pressed (re-render, save nothing), else (the rows to
    save, blanks dropped, False)."""
    rows: list[dict[str, Any]] = []
    for value in form.getlist("fallback_route"):
        endpoint_id, _, model = (value or "").partition(":")
        try:
            rows.append({"endpoint_id": int(endpoint_id), "model": model})
        except ValueError:
            rows.append({"endpoint_id": None, "model": ""})  # "Choose a model…"
    action, _, raw_index = (form.get("fallback_action") or "").partition(":")
    if not action:
        return [r for r in rows if r["model"]], False
    index = int(raw_index) if raw_index.isdigit() else -1
    if action == "add" and len(rows) < MAX_FALLBACKS:
        rows.append({"endpoint_id": None, "model": ""})
    elif action == "remove" and 0 <= index < len(rows):
        rows.pop(index)
    elif action in ("up", "down"):
        other = index - 1 if action == "up" else index + 1
        if 0 <= index < len(rows) and 0 <= other < len(rows):
            rows[index], rows[other] = rows[other], rows[index]
    return rows, True


@bp.route("/api/fallbacks", methods=["GET", "PUT"])
def fallbacks_json():
    if request.method == "PUT":
        data = request_data()
        if set(data) != {"fallbacks"}:
            raise invalid(
                'The body is {"fallbacks": [{endpoint_id, model}, …]}.', "invalid_fallbacks"
            )
        g.user.fallbacks = validate_fallbacks(g.user.id, data["fallbacks"])
        db.session.commit()
    return jsonify(fallbacks=g.user.fallbacks)


@bp.post("/settings/fallbacks")
def fallbacks_page():
    rows, editing = editor_rows(request.form)
    if not editing:
        g.user.fallbacks = validate_fallbacks(g.user.id, rows)
        db.session.commit()
        rows = g.user.fallbacks
    if not is_htmx():
        return redirect(url_for("pages.settings", section="endpoints") + "#fallbacks")
    return render_template(
        "partials/_settings_fallbacks.html",
        fallback_rows=rows,
        endpoints=endpoint_store.list_endpoints(g.user.id),
        saved=not editing,
    )
