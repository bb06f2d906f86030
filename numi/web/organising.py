"""Routes for organising chats (pins, archive, tags, bulk actions with undo) and the theme.

    POST /c/<chat>/organise     pinned=0|1, archived=0|1 (HTMX: the list, or an Undo toast)
    POST /chats/bulk            action=pin|unpin|archive|unarchive|delete|restore, ids=...
    GET  /archived              the Archived view (restore or delete)
    POST /settings/appearance   theme=system|light|dark
and the JSON twins: PATCH /api/session/<chat> (pinned, archived, tags, in api.py),
POST /api/sessions/bulk, GET /api/tags, GET|PATCH /api/preferences ({theme}, {voice}: numi/web/voice.py).
"""

from __future__ import annotations

import uuid

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for
from markupsafe import Markup

from ..chat import chats, organising
from ..setting_values import parse_bool
from ..errors import invalid
from ..extensions import db, turn_manager
from . import voice
from .inputs import request_data
from .projects import memory_preference, save_memory_preference
from .request_kind import is_htmx
from .sidebar import sidebar_context

bp = Blueprint("organising", __name__)

THEMES = ("system", "light", "dark")
# What the undo toast says after each action, and the action that undoes it.
DONE = {"archive": ("archived", "unarchive"), "delete": ("deleted", "restore")}


def sidebar_list(current_id: str | None = None, tag: str = ""):
    """The sidebar list's first page, as #chat-list's content."""
    page = chats.list_chats(g.user.id, limit=current_app.config["NUMI_PAGE_SIZE_CHATS"], tag=tag)
    running = turn_manager().running_among([c.id for c in page.pinned + page.items])
    return render_template(
        "partials/_chat_list_page.html",
        sidebar=page,
        current_id=current_id,
        tag=tag,
        running_ids=running,
        group_before="",
        **sidebar_context(),
    )


def undo_toast(action: str, changed: list[str], current_id: str | None, *, in_page=False):
    """The answer to an archive or delete: the chats leave the list, a toast offers Undo
    (`in_page`: the toast of a page rendered whole, whose list lacks the chats already)."""
    word, undo = DONE[action]
    return render_template(
        "partials/_undo_toast.html",
        in_page=in_page,
        changed=changed,
        word=word,
        undo=undo,
        current_id=current_id,
        toast_id=f"toast-{uuid.uuid4().hex[:12]}",
    )


def deleted_chat_toast() -> Markup | str:
    """The Undo toast of the open chat just deleted (`?deleted=<id>` on the page it went
    to, chat_forms.delete), while it can still be restored; else nothing."""
    chat_id = (request.args.get("deleted") or "")[:36]
    if not chat_id or not organising.restorable(g.user.id, chat_id):
        return ""
    current = (request.view_args or {}).get("chat_id")  # the chat this page shows
    return Markup(undo_toast("delete", [chat_id], current, in_page=True))  # a rendered template


@bp.post("/c/<chat_id>/organise")
def organise(chat_id: str):
    data = request_data()
    fields = {key: parse_bool(data[key], key) for key in ("pinned", "archived") if key in data}
    if "tags" in data:
        fields["tags"] = data["tags"]
    chat = organising.organise(g.user.id, chat_id, fields)
    current = request.args.get("current")
    if not is_htmx():
        back = request.referrer if (request.referrer or "").startswith(request.host_url) else None
        return redirect(back or url_for("pages.chat_view", chat_id=chat.id))
    if fields.get("archived") is True:
        return undo_toast("archive", [chat.id], current)
    if request.args.get("view") == "archived":
        return ""  # restored: the row leaves the Archived view
    return sidebar_list(current)


@bp.post("/chats/bulk")
def bulk_html():
    action = request.form.get("action")
    ids = request.form.getlist("ids")
    current = request.form.get("current")
    # A guard (strict: with Redis unreachable, live_unavailable rather than a guess).
    running = turn_manager().running_chat_ids(ids) if action == "delete" else frozenset()
    changed = organising.bulk(g.user.id, action, ids, running)
    if not is_htmx():
        return redirect(url_for("pages.index"))
    if action in DONE:
        return undo_toast(action, changed, current)
    # An undo (or a bulk pin): the list again, and the toast that offered it goes.
    return sidebar_list(current) + render_template(
        "partials/_toast_gone.html", toast_id=request.form.get("toast", "")
    )


@bp.get("/archived")
def archived():
    config = current_app.config
    page = chats.list_chats(
        g.user.id,
        limit=config["NUMI_PAGE_SIZE_CHATS"],
        cursor=request.args.get("cursor") or None,
        view="archived",
    )
    return render_template("archived.html", page=page)


def _save_theme(theme) -> None:
    if theme not in THEMES:
        raise invalid(f"theme must be one of: {', '.join(THEMES)}.", "invalid_theme")
    g.user.theme = theme
    db.session.commit()


@bp.post("/settings/appearance")
def appearance():
    # The page applied the theme on click (settings.js) and saves it in the background;
    # without a script a full reload follows, so the theme is on <html> before it paints.
    _save_theme(request_data().get("theme"))
    if is_htmx():
        return "", 204
    return redirect(url_for("pages.settings", section="appearance"))


# --- JSON ---------------------------------------------------------------------------------


@bp.post("/api/sessions/bulk")
def bulk_json():
    data = request_data()
    ids = data.get("ids")
    running = (
        turn_manager().running_chat_ids([i for i in ids if isinstance(i, str)])
        if data.get("action") == "delete" and isinstance(ids, list)
        else frozenset()
    )
    changed = organising.bulk(g.user.id, data.get("action"), ids, running)
    return jsonify(action=data["action"], changed=changed)


@bp.route("/api/preferences", methods=["GET", "PATCH"])
def preferences_json():
    if request.method == "PATCH":
        data = request_data()
        # `memory` and `voice` are checked before anything is saved (web/projects.py,
        # web/voice.py).
        memory = memory_preference(data)
        voice_settings = voice.validate(data["voice"]) if "voice" in data else None
        if "theme" in data or (memory is None and voice_settings is None):
            _save_theme(data.get("theme"))
        save_memory_preference(memory)
        if voice_settings is not None:
            voice.save(voice_settings)
    return jsonify(
        theme=g.user.theme, memory=g.user.memory_enabled, voice=voice.preferences(g.user)
    )


@bp.get("/api/tags")
def tags_json():
    return jsonify(tags=organising.user_tags(g.user.id))
