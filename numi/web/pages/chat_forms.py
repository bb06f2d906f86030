"""The forms that make and change a chat: create, rename, delete, its settings and tools."""

from __future__ import annotations

import logging

from flask import current_app, g, redirect, render_template, request, url_for

from ... import endpoints as endpoint_store
from ...agent.approvals import default_policy
from ...agent.tools import mcp
from ...agent.tools.code import INSTALL_HINT as CODE_INSTALL_HINT
from ...agent.tools.code import extra_installed as code_tool_installed
from ...chat import chats, organising
from ...chat import temporary as temporary_chats
from ...setting_values import parse_bool
from ...agent.send import Send
from ...agent.sending import start_turn
from ...errors import NumiError, no_model, turn_running
from ...extensions import db, turn_manager
from ...services import services
from .. import temporary as temporary_routes
from ..inputs import request_data
from ..request_kind import request_client, request_timezone
from ..organising import undo_toast
from ..fallbacks import editor_rows
from ..request_kind import is_htmx
from ..sidebar import sidebar_context
from .base import bp, limits

log = logging.getLogger(__name__)


@bp.post("/chats")
def create_chat():
    """A new chat; with `message` (the home page's composer) its first question goes too,
    so a new chat is one step, as in the chat apps people know."""
    data = request_data()
    fields = {"title": data.get("title") or "New chat"}
    if data.get("route"):
        fields.update(route_fields(data["route"]))
    message = data.get("message")
    if message is not None and not str(message).strip():
        message = None  # an empty box is a plain "New chat"
    send = None
    if message is not None:
        # Checked before the chat exists: a refused send leaves nothing behind.
        payload = {"message": message, "request_id": data.get("request_id") or None}
        send = Send.from_payload(request_timezone(payload), current_app.config)
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
    if send is not None:
        try:
            if chat.endpoint_id is None or not chat.model:
                # The turn would refuse it after this page has gone, taking the text along.
                raise no_model()
            start_turn(g.user.id, g.user.is_admin, chat.id, send, client=request_client("form"))
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


@bp.get("/c/<chat_id>/menu")
def chat_menu(chat_id: str):
    """A sidebar row's "…" menu, fetched when it first opens."""
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template(
        "partials/_chat_menu.html",
        chat=chat,
        current_id=request.args.get("current"),
        **sidebar_context(),
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
            # A fresh page (its own socket and title), whose toast offers Undo.
            headers["HX-Redirect"] = f"{target}?deleted={chat_id}"
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
    for key in ("system_prompt", "temperature", "max_tokens", "reasoning_effort", "use_documents"):
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
                **sidebar_context(),
                **chat_tools_context(),
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
            **sidebar_context(),
            **chat_tools_context(),
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
        out["auto_approve"] = parse_bool(request.form.get("auto_approve"), "auto_approve")
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


def chat_tools_context() -> dict:
    """What a chat's (or a project's defaults') Tools fieldset shows: `tool_choices`, and
    `chat_mcp_servers`, the user's MCP servers that are on (none without the MCP SDK)."""
    if "chat_tools_context" not in g:  # a page's header and a project's defaults share it
        servers = mcp.list_servers(g.user.id) if mcp.sdk_available() else []
        g.chat_tools_context = {
            "tool_choices": chat_tool_choices(),
            "chat_mcp_servers": [s for s in servers if s.enabled],
            # Without the `code` extra the Code switch is not offered: the form says why.
            "code_install_hint": None
            if code_tool_installed()
            or not (g.user.is_admin or current_app.config["NUMI_CODE_ALL_USERS"])
            else CODE_INSTALL_HINT,
        }
    return g.chat_tools_context


def chat_tool_choices() -> list[dict]:
    """The tools the signed-in user may turn on in a chat, with labels for the settings form."""
    registry = services().tools
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
    "run_python": "Code (run Python in a kernel)",
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


@bp.post("/c/<chat_id>/kernel/restart")
def restart_kernel(chat_id: str):
    """The header's "Restart kernel": the chat's Python kernel ends (its variables with it);
    the next run_python call starts a new one and says so. Only the chat's owner reaches it."""
    chat = chats.get_chat(g.user.id, chat_id)
    pool = services().kernels
    kernel = pool.get(chat.id)
    ended = kernel is not None and kernel.user_id == g.user.id and pool.discard(chat.id, "restart")
    message = (
        "The kernel was restarted; variables are gone."
        if ended
        else "No kernel is running in this chat; the next run starts one."
    )
    if is_htmx():
        headers = {"HX-Retarget": "#toasts", "HX-Reswap": "beforeend"}
        return render_template("partials/_kernel_toast.html", message=message), 200, headers
    if request.accept_mimetypes.best == "application/json":
        return {"restarted": ended, "message": message}
    return redirect(url_for("pages.chat_view", chat_id=chat.id))
