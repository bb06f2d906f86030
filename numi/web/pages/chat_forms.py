"""The forms that make and change a chat: create, rename, delete, its settings and tools."""

from __future__ import annotations

import logging

from flask import current_app, g, redirect, render_template, request, url_for

from ... import endpoints as endpoint_store
from ...agent.approvals import default_policy
from ...chat import chats, followups, organising
from ...chat import temporary as temporary_chats
from ...agent.sending import start_turn
from ...errors import NumiError, no_model, turn_running
from ...extensions import db, turn_manager
from .. import temporary as temporary_routes
from ..inputs import request_data
from ..organising import undo_toast
from ..fallbacks import editor_rows
from ..request_kind import is_htmx
from .base import bp, limits

log = logging.getLogger(__name__)


@bp.post("/chats")
def create_chat():
    """A new chat; with `message` (the home page's composer) its first question goes too,
    so a new chat is one step, as in the chat apps people know."""
    from ..streams import request_timezone

    data = request_data()
    fields = {"title": data.get("title") or "New chat"}
    if data.get("route"):
        fields.update(route_fields(data["route"]))
    message = data.get("message")
    if message is not None and not str(message).strip():
        message = None  # an empty box is a plain "New chat"
    if message is not None:
        # Checked before the chat exists: a refused text leaves nothing behind.
        followups.check_text(message, current_app.config["NUMI_MAX_MESSAGE_CHARS"])
    temporary = temporary_chats.temporary_flag(data.get("temporary"))
    # "+ New chat" reuses the user's empty chat, if one is left, instead of adding another:
    # clicking it twice never leaves empty chats behind in the sidebar.
    reuse = fields["title"] == "New chat" and not temporary
    chat = chats.newest_empty_chat(g.user.id) if reuse else None
    created = chat is None
    if created:
        chat = chats.create_chat(g.user.id, fields, limits(), temporary=temporary)
    else:
        chat = chats.update_chat(g.user.id, chat.id, fields, limits())
        chats.touch_chat(chat)
    if message is not None:
        payload = {"message": message, "request_id": data.get("request_id") or None}
        try:
            if chat.endpoint_id is None or not chat.model:
                # The turn would refuse it after this page has gone, taking the text along.
                raise no_model()
            start_turn(
                g.user.id, g.user.is_admin, chat.id, request_timezone(payload), current_app.config
            )
        except NumiError:
            # Refused before anything was saved (no model, say): the chat made for it goes
            # too, and the home page keeps the text (htmx shows the error as a toast).
            db.session.rollback()
            if created:
                db.session.delete(chats.get_chat(g.user.id, chat.id))
                db.session.commit()
            raise
    temporary_routes.started(chat)
    target = url_for("pages.chat_view", chat_id=chat.id)
    if is_htmx():
        return "", 204, {"HX-Location": target}
    return redirect(target)


@bp.get("/c/<chat_id>/rename")
def rename_form(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template(
        "partials/_chat_rename.html", chat=chat, current_id=request.args.get("current")
    )


@bp.get("/c/<chat_id>/item")
def chat_item(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template(
        "partials/_chat_item.html", chat=chat, current_id=request.args.get("current")
    )


@bp.post("/c/<chat_id>/rename")
def rename(chat_id: str):
    data = request_data()
    # The inline editor edits the title and the tags; both are checked before either is saved.
    changes = organising.validate({"tags": data["tags"] or ""} if "tags" in data else {})
    chat = chats.update_chat(g.user.id, chat_id, {"title": data.get("title", "")}, limits())
    if changes:
        organising.apply(g.user.id, chat, changes)
        db.session.commit()
    if is_htmx():
        current = request.args.get("current")
        # The current chat's header title follows (and, through it, the tab title).
        return render_template("partials/_chat_item.html", chat=chat, current_id=current) + (
            render_template("partials/_chat_title.html", chat=chat, oob=True)
            if current == chat.id
            else ""
        )
    return redirect(url_for("pages.chat_view", chat_id=chat.id))


@bp.post("/c/<chat_id>/delete")
def delete(chat_id: str):
    _refuse_while_running(chat_id)
    chats.delete_chat(g.user.id, chat_id)
    # Deleting the open chat opens the next one (the newest left), not a dead URL.
    first = chats.list_chats(g.user.id, limit=1)
    following = first.pinned + first.items
    target = (
        url_for("pages.chat_view", chat_id=following[0].id) if following else url_for("pages.index")
    )
    if is_htmx():
        headers = {}
        if request.args.get("current") == chat_id:
            headers["HX-Redirect"] = target  # a fresh page: its own socket and title
            return "", 200, headers
        # Another chat: it leaves the sidebar and a toast offers Undo, as a bulk delete does.
        return undo_toast("delete", [chat_id], request.args.get("current"))
    return redirect(target)


@bp.post("/c/<chat_id>/settings")
def chat_settings(chat_id: str):
    data = request_data()
    fields: dict = {}
    if "route" in data:
        fields.update(route_fields(data["route"]))
    settings = {}
    for key in ("system_prompt", "temperature", "max_tokens", "reasoning_effort"):
        if key in data:
            settings[key] = data[key]
    settings.update(tool_settings(data))
    if "fallbacks_shown" in request.form:
        rows, editing = editor_rows(request.form)
        if editing:  # a row button: show the edited rows, save nothing yet
            return render_template(
                "partials/_chat_header.html",
                chat=chats.get_chat(g.user.id, chat_id),
                endpoints=endpoint_store.list_endpoints(g.user.id),
                fallback_rows=rows,
            )
        settings["fallbacks"] = rows
    elif "fallbacks" in data and request.mimetype == "application/json":
        settings["fallbacks"] = data["fallbacks"]
    if settings:
        fields["settings"] = settings
    chat = chats.update_chat(g.user.id, chat_id, fields, limits())
    if is_htmx():
        return render_template(
            "partials/_chat_header.html",
            chat=chat,
            endpoints=endpoint_store.list_endpoints(g.user.id),
            # The header's model picker saves too, but must not open the Settings panel.
            saved=data.get("source") != "picker",
        )
    return redirect(url_for("pages.chat_view", chat_id=chat.id))


def tool_settings(data: dict) -> dict:
    """The tools part of a chat settings form (or JSON body; the project defaults form too):
    which tools, the workspace, auto-approve and the approval policy per tool. A form marks
    its tool checkboxes with `tools_shown`, so an empty list (every box unticked) is told
    apart from a form without them; a policy field `policy_<tool>` left on "default"
    stores no policy for that tool."""
    out: dict = {}
    is_form = request.mimetype != "application/json"
    if is_form and "tools_shown" in request.form:
        out["tools"] = [name for name in request.form.getlist("tools") if name]
        out["auto_approve"] = request.form.get("auto_approve") in ("1", "on", "true")
        out["tool_policy"] = {
            key.removeprefix("policy_"): value
            for key, value in request.form.items()
            if key.startswith("policy_") and value
        }
    elif not is_form:
        for key in ("tools", "auto_approve", "tool_policy"):
            if key in data:
                out[key] = data[key]
    if "workspace" in data:
        out["workspace"] = data["workspace"]
    return out


@bp.app_template_global("chat_tool_choices")
def chat_tool_choices() -> list[dict]:
    """The tools the signed-in user may turn on in a chat, with labels for the settings form."""
    registry = current_app.extensions["numi.tools"]
    if hasattr(registry, "available"):
        tools = registry.available(g.user.id, is_admin=g.user.is_admin)
    else:
        tools = registry.active(registry.names(), is_admin=g.user.is_admin)
    # "(admin)" tells users apart: with one user (single-user mode, or no auth) it says nothing.
    several_users = current_app.config["NUMI_AUTH"] == "multi"
    choices = [
        {
            "name": t.name,
            "label": TOOL_LABELS.get(t.name, t.name),
            "description": t.description,
            "admin_only": t.admin_only and several_users,
            "default_policy": default_policy(t),
            "always_ask": getattr(t, "always_ask", False),
        }
        for t in tools
    ]
    # The shipped tools in the order of TOOL_LABELS (finding things, then the workspace from
    # reading to changing, then commands); plugins' and MCP servers' tools after, by label.
    order = {name: n for n, name in enumerate(TOOL_LABELS)}
    return sorted(choices, key=lambda c: (order.get(c["name"], len(order)), c["label"].casefold()))


TOOL_LABELS = {
    "web_search": "Web search",
    "fetch_page": "Fetch web pages",
    "search_documents": "Search my documents",
    "current_time": "Current time",
    "remember": "Remember (propose a memory)",
    "list_files": "Workspace: list files",
    "read_file": "Workspace: read files",
    "search_files": "Workspace: search files",
    "write_file": "Workspace: write files",
    "patch_file": "Workspace: patch files",
    "bash": "Bash commands",
}


def route_fields(value: str) -> dict:
    """`<endpoint_id>:<model>` from the model picker."""
    endpoint_id, _, model = (value or "").partition(":")
    if not endpoint_id:
        return {"endpoint_id": None, "model": ""}
    return {"endpoint_id": endpoint_id, "model": model}


def _refuse_while_running(chat_id: str) -> None:
    if turn_manager().is_running(chat_id):
        raise turn_running()


# --- settings: endpoints -------------------------------------------------------------------
