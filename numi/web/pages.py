"""Server-rendered pages and the HTMX fragments they swap.

The same partial renders inside the full page, as an HTMX response and as a WebSocket push.
`HX-Request` decides fragment versus page. Every form also works without JavaScript.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for

from .. import endpoints as endpoint_store
from .. import prompts as prompt_store
from ..agent.approvals import default_policy
from ..chat import chats, followups, organising
from ..chat.versions import version_info
from ..errors import NumiError, no_model
from ..extensions import db
from ..models import utcnow
from .inputs import int_arg, request_data
from .request_kind import is_htmx

bp = Blueprint("pages", __name__)
log = logging.getLogger(__name__)


def _limits():
    return current_app.config


@bp.get("/healthz")
def healthz():
    return {"ok": True}


def _running_ids(page) -> set[str]:
    """Which chats of a sidebar page are answering (one TurnManager call per page)."""
    return current_app.extensions["numi.turns"].running_among([chat.id for chat in page.pinned + page.items])


@bp.get("/")
def index():
    page = chats.list_chats(g.user.id, limit=current_app.config["NUMI_PAGE_SIZE_CHATS"])
    return render_template(
        "chat.html",
        chat=None,
        sidebar=page,
        running_ids=_running_ids(page),
        endpoints=endpoint_store.list_endpoints(g.user.id),
        tags=organising.user_tags(g.user.id),
    )


@bp.get("/c/<chat_id>")
def chat_view(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    config = current_app.config
    at = int_arg("at", low=1)  # open on a message (search hit, outline) instead of the end
    has_newer = False
    if at is not None:
        page, has_newer = chats.list_messages_around(chat, at, limit=config["NUMI_PAGE_SIZE_MESSAGES"])
    else:
        page = chats.list_messages(chat, limit=config["NUMI_PAGE_SIZE_MESSAGES"])
    # The open chat is in the sidebar even when it is older than the first page: as many
    # pages as it takes, up to ten.
    size = config["NUMI_PAGE_SIZE_CHATS"]
    # (A pinned chat is in the first page's Pinned group; an archived one is not listed.)
    listed = chat.pinned_at is None and chat.archived_at is None
    pages = min(10, chats.chats_listed_before(g.user.id, chat) // size + 1) if listed else 1
    sidebar = chats.list_chats(g.user.id, limit=size * pages)
    running = current_app.extensions["numi.turns"].is_running(chat.id)
    queue = [item.to_dict() for item in followups.list_items(g.user.id, chat.id)]
    return render_template(
        "chat.html",
        queue=queue,
        paused=bool(queue) and not running,
        chat=chat,
        sidebar=sidebar,
        running_ids=_running_ids(sidebar),
        endpoints=endpoint_store.list_endpoints(g.user.id),
        tags=organising.user_tags(g.user.id),
        running=running,
        has_newer=has_newer,
        interrupted=not running and not has_newer and interrupted_turn(page.items),
        stale_calls=not running,
        prompts=prompt_store.list_prompts(g.user.id),
        **transcript_context(page),
    )


@bp.get("/c/<chat_id>/messages")
def older_messages(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    page = chats.list_messages(
        chat, limit=current_app.config["NUMI_PAGE_SIZE_MESSAGES"], before_id=int_arg("before", low=1)
    )
    running = current_app.extensions["numi.turns"].is_running(chat.id)
    return render_template("partials/_messages_page.html", chat=chat, stale_calls=not running,
                           **transcript_context(page))


def interrupted_turn(messages) -> bool:
    """Whether the newest turn stopped without a final answer while no turn is running.

    A turn that fails saves its error on a message (shown with Retry); only a server that
    stopped mid-turn (a crash, a kill, a restart) leaves the transcript ending on the
    question, on a step that called tools, or on a tool result. Nothing is marked at
    start-up: the transcript itself says it, whenever the chat is opened.
    """
    if not messages:
        return False
    last = messages[-1]
    return last.role in ("user", "tool") or (last.role == "assistant" and bool(last.tool_calls))


def transcript_context(page) -> dict:
    """A page of messages plus what its templates need to pair tool calls with results."""
    tool_results = {m.tool_call_id: m for m in page.items if m.role == "tool" and m.tool_call_id}
    page_call_ids = {call.get("id") for m in page.items if m.role == "assistant" for call in m.tool_calls}
    versions = version_info(page.items[0].chat_id, page.items) if page.items else {}
    return {"transcript": page, "tool_results": tool_results, "page_call_ids": page_call_ids, "versions": versions}


@bp.post("/c/<chat_id>/retry")
def retry(chat_id: str):
    """Answer the chat's last question again (after an error), on the live connection."""
    from sqlalchemy import select

    from ..extensions import db
    from ..models import Message
    from .streams import request_timezone, start_turn

    chat = chats.get_chat(g.user.id, chat_id)
    last_user = db.session.execute(
        select(Message).where(Message.chat_id == chat.id, Message.role == "user", Message.shown())
        .order_by(Message.id.desc()).limit(1)
    ).scalar_one_or_none()
    if last_user is None:
        raise NumiError("nothing_to_retry", "There is no question to answer again.", 409)
    if not last_user.request_id:
        last_user.request_id = f"retry-{last_user.id}"
        db.session.commit()
    start_turn(g.user.id, g.user.is_admin, chat.id, request_timezone({"message": last_user.content or " ", "request_id": last_user.request_id}),
               current_app.config)
    if is_htmx():
        return "", 204
    return redirect(url_for("pages.chat_view", chat_id=chat.id))


@bp.get("/chats")
def chat_list():
    config = current_app.config
    query = (request.args.get("q") or "")[: config["NUMI_MAX_TITLE_CHARS"]]
    tag = (request.args.get("tag") or "")[:organising.MAX_TAG_CHARS]
    page = chats.list_chats(
        g.user.id, limit=config["NUMI_PAGE_SIZE_CHATS"], cursor=request.args.get("cursor") or None, query=query,
        tag=tag,
    )
    current = request.args.get("current")
    if is_htmx():
        # `group`: the date group the previous page ended in, so its header is not repeated.
        return render_template("partials/_chat_list_page.html", sidebar=page, query=query, current_id=current, tag=tag,
                               running_ids=_running_ids(page), group_before=(request.args.get("group") or "")[:40])
    return redirect(url_for("pages.index"))


@bp.get("/chats/running")
def running_chats():
    """Which of the listed chats (`ids`, comma-separated, the sidebar's page) are answering:
    the sidebar polls this to mark chats whose turn runs in the background."""
    ids = [i for i in (request.args.get("ids") or "").split(",") if i][:500]
    owned = chats.owned_chat_ids(g.user.id, ids)
    running = current_app.extensions["numi.turns"].running_among(owned)
    return jsonify(running=sorted(running))


_CHAT_ID_MARK = "chat-id-mark"
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")


@bp.app_template_global("chat_item_urls")
def chat_item_urls(chat_id: str, current_id: str | None) -> dict[str, str]:
    """The four links of a sidebar item. A page lists fifty items, and `url_for` for each
    link was a quarter of `GET /`: the URLs are built once per request with a mark for the
    chat id, which each item fills in (an id that would need quoting is built in full)."""
    if not _PLAIN_ID.fullmatch(chat_id):
        return _item_urls(chat_id, current_id)
    cache = g.setdefault("chat_item_urls", {})
    shapes = cache.get(current_id)
    if shapes is None:
        shapes = cache[current_id] = _item_urls(_CHAT_ID_MARK, current_id)
    # The path comes first, so the first mark is the chat id's (`current` may hold anything).
    return {name: url.replace(_CHAT_ID_MARK, chat_id, 1) for name, url in shapes.items()}


def _item_urls(chat_id: str, current_id: str | None) -> dict[str, str]:
    return {
        "view": url_for("pages.chat_view", chat_id=chat_id),
        "organise": url_for("organising.organise", chat_id=chat_id, current=current_id),
        "rename": url_for("pages.rename_form", chat_id=chat_id, current=current_id),
        "delete": url_for("pages.delete", chat_id=chat_id, current=current_id),
    }


@bp.app_template_global("chat_group")
def chat_group(chat) -> str:
    """The sidebar's date group of a chat, in the browser's time zone (the `numi_tz` cookie,
    minutes east of UTC, set by sidebar.js; UTC until it is known)."""
    try:
        offset = max(-16 * 60, min(16 * 60, int(request.cookies.get("numi_tz", "0"))))
    except ValueError:
        offset = 0
    shift = timedelta(minutes=offset)
    return chats.date_group(chat.updated_at + shift, utcnow() + shift)


@bp.post("/chats")
def create_chat():
    """A new chat; with `message` (the home page's composer) its first question goes too,
    so a new chat is one step, as in the chat apps people know."""
    from .streams import request_timezone, start_turn

    data = request_data()
    fields = {"title": data.get("title") or "New chat"}
    if data.get("route"):
        fields.update(_route(data["route"]))
    message = data.get("message")
    if message is not None and not str(message).strip():
        message = None  # an empty box is a plain "New chat"
    if message is not None:
        # Checked before the chat exists: a refused text leaves nothing behind.
        followups.check_text(message, current_app.config["NUMI_MAX_MESSAGE_CHARS"])
    # "+ New chat" reuses the user's empty chat, if one is left, instead of adding another:
    # clicking it twice never leaves empty chats behind in the sidebar.
    chat = chats.newest_empty_chat(g.user.id) if fields["title"] == "New chat" else None
    created = chat is None
    if created:
        chat = chats.create_chat(g.user.id, fields, _limits())
    else:
        chat = chats.update_chat(g.user.id, chat.id, fields, _limits())
        chats.touch_chat(chat)
    if message is not None:
        payload = {"message": message, "request_id": data.get("request_id") or None}
        try:
            if chat.endpoint_id is None or not chat.model:
                # The turn would refuse it after this page has gone, taking the text along.
                raise no_model()
            start_turn(g.user.id, g.user.is_admin, chat.id, request_timezone(payload), current_app.config)
        except NumiError:
            # Refused before anything was saved (no model, say): the chat made for it goes
            # too, and the home page keeps the text (htmx shows the error as a toast).
            db.session.rollback()
            if created:
                db.session.delete(chats.get_chat(g.user.id, chat.id))
                db.session.commit()
            raise
    target = url_for("pages.chat_view", chat_id=chat.id)
    if is_htmx():
        return "", 204, {"HX-Location": target}
    return redirect(target)


@bp.get("/c/<chat_id>/rename")
def rename_form(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template("partials/_chat_rename.html", chat=chat, current_id=request.args.get("current"))


@bp.get("/c/<chat_id>/item")
def chat_item(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template("partials/_chat_item.html", chat=chat, current_id=request.args.get("current"))


@bp.post("/c/<chat_id>/rename")
def rename(chat_id: str):
    data = request_data()
    # The inline editor edits the title and the tags; both are checked before either is saved.
    changes = organising.validate({"tags": data["tags"] or ""} if "tags" in data else {})
    chat = chats.update_chat(g.user.id, chat_id, {"title": data.get("title", "")}, _limits())
    if changes:
        organising.apply(g.user.id, chat, changes)
        db.session.commit()
    if is_htmx():
        current = request.args.get("current")
        # The current chat's header title follows (and, through it, the tab title).
        return render_template("partials/_chat_item.html", chat=chat, current_id=current) + (
            render_template("partials/_chat_title.html", chat=chat, oob=True) if current == chat.id else "")
    return redirect(url_for("pages.chat_view", chat_id=chat.id))


@bp.post("/c/<chat_id>/delete")
def delete(chat_id: str):
    _refuse_while_running(chat_id)
    chats.delete_chat(g.user.id, chat_id)
    # Deleting the open chat opens the next one (the newest left), not a dead URL.
    first = chats.list_chats(g.user.id, limit=1)
    following = first.pinned + first.items
    target = url_for("pages.chat_view", chat_id=following[0].id) if following else url_for("pages.index")
    if is_htmx():
        headers = {}
        if request.args.get("current") == chat_id:
            headers["HX-Redirect"] = target  # a fresh page: its own socket and title
        return "", 200, headers
    return redirect(target)


@bp.post("/c/<chat_id>/settings")
def chat_settings(chat_id: str):
    data = request_data()
    fields: dict = {}
    if "route" in data:
        fields.update(_route(data["route"]))
    settings = {}
    for key in ("system_prompt", "temperature", "max_tokens", "reasoning_effort"):
        if key in data:
            settings[key] = data[key]
    settings.update(_tool_settings(data))
    if settings:
        fields["settings"] = settings
    chat = chats.update_chat(g.user.id, chat_id, fields, _limits())
    if is_htmx():
        return render_template(
            "partials/_chat_header.html",
            chat=chat,
            endpoints=endpoint_store.list_endpoints(g.user.id),
            # The header's model picker saves too, but must not open the Settings panel.
            saved=data.get("source") != "picker",
        )
    return redirect(url_for("pages.chat_view", chat_id=chat.id))


def _tool_settings(data: dict) -> dict:
    """The tools part of the chat settings form (or JSON body): which tools, the workspace,
    auto-approve and the approval policy per tool. A form marks its tool checkboxes with
    `tools_shown`, so an empty list (every box unticked) is told apart from a form without
    them; a policy field `policy_<tool>` left on "default" stores no policy for that tool."""
    out: dict = {}
    is_form = request.mimetype != "application/json"
    if is_form and "tools_shown" in request.form:
        out["tools"] = [name for name in request.form.getlist("tools") if name]
        out["auto_approve"] = request.form.get("auto_approve") in ("1", "on", "true")
        out["tool_policy"] = {key.removeprefix("policy_"): value for key, value in request.form.items()
                              if key.startswith("policy_") and value}
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
    return [{"name": t.name, "label": TOOL_LABELS.get(t.name, t.name), "description": t.description,
             "admin_only": t.admin_only, "default_policy": default_policy(t)} for t in tools]


TOOL_LABELS = {
    "current_time": "Current time",
    "web_search": "Web search",
    "fetch_page": "Fetch web pages",
    "list_files": "Workspace: list files",
    "read_file": "Workspace: read files",
    "search_files": "Workspace: search files",
    "write_file": "Workspace: write files",
    "patch_file": "Workspace: patch files",
    "bash": "Bash commands",
    "search_documents": "Search my documents",
}


def _route(value: str) -> dict:
    """`<endpoint_id>:<model>` from the model picker."""
    endpoint_id, _, model = (value or "").partition(":")
    if not endpoint_id:
        return {"endpoint_id": None, "model": ""}
    return {"endpoint_id": endpoint_id, "model": model}


def _refuse_while_running(chat_id: str) -> None:
    if current_app.extensions["numi.turns"].is_running(chat_id):
        raise NumiError("turn_running", "A turn is running in this chat; stop it first.", 409)


# --- settings: endpoints -------------------------------------------------------------------


@bp.get("/settings")
def settings():
    return render_template("settings.html", **settings_context())


def settings_context() -> dict:
    """What the settings page shows (also rendered by forms that answer with the whole page)."""
    from ..agent.tools import web

    return {
        "endpoints": endpoint_store.list_endpoints(g.user.id),
        "kinds": ("openai_chat", "openai_responses", "anthropic"),
        "web_settings": web.load_settings(g.user.id),
        "prompts": prompt_store.list_prompts(g.user.id),
    }



@bp.post("/settings/web-search")
def web_search_settings():
    """Save the user's web search backend and fetch address rules."""
    from ..agent.tools import web

    data = request_data()
    saved = web.save_settings(g.user.id, data, is_admin=g.user.is_admin)
    if is_htmx():
        return render_template("partials/_web_settings.html", web_settings=saved, saved=True)
    return redirect(url_for("pages.settings"))


@bp.post("/settings/endpoints")
def add_endpoint():
    data = request_data()
    shared = bool(data.pop("shared", None)) and g.user.is_admin
    endpoint = endpoint_store.create_endpoint(
        None if shared else g.user.id, data, max_name=current_app.config["NUMI_MAX_NAME_CHARS"]
    )
    if not endpoint.default_model:
        # Without a default model the list is what the user picks from next: fetch it now
        # rather than showing "0 models" until Test is pressed. A failure shows on Test.
        try:
            endpoint_store.models(endpoint, max_age_seconds=0, refresh=True)
        except NumiError as exc:
            log.info("models of new endpoint %s not fetched: %s", endpoint.id, exc.code)
    if is_htmx():
        # The list, and an empty Add form in place of the filled one (its key must not stay).
        return render_template("partials/_endpoint_list.html", endpoints=endpoint_store.list_endpoints(g.user.id)) \
            + render_template("partials/_endpoint_add_form.html", oob=True)
    return _settings_list_or_redirect()


@bp.get("/settings/endpoints/<int:endpoint_id>")
def endpoint_card(endpoint_id: int):
    endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)
    return render_template("partials/_endpoint.html", endpoint=endpoint, status=None)


@bp.get("/settings/endpoints/<int:endpoint_id>/edit")
def edit_endpoint_form(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    if is_htmx():
        return render_template("partials/_endpoint_edit.html", endpoint=endpoint)
    return render_template("settings.html", editing=endpoint.id, **settings_context())


@bp.post("/settings/endpoints/<int:endpoint_id>")
def edit_endpoint(endpoint_id: int):
    """Save the Edit form: name, kind, URL, key (empty keeps it), default model, reasoning
    policy, enabled, and the models hidden from the pickers."""
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    data = request_data()
    data.pop("hidden_models_sent", None)
    if request.mimetype != "application/json":
        data["enabled"] = "1" in request.form.getlist("enabled")  # the checkbox after its hidden "0"
        if request.form.get("hidden_models_sent"):
            data["hidden_models"] = request.form.getlist("hidden_models")
        else:
            data.pop("hidden_models", None)
    endpoint_store.update_endpoint(endpoint, data, max_name=current_app.config["NUMI_MAX_NAME_CHARS"])
    if is_htmx():
        return render_template("partials/_endpoint.html", endpoint=endpoint, status=("ok", "Saved."))
    return redirect(url_for("pages.settings"))


@bp.post("/settings/endpoints/<int:endpoint_id>/delete")
def remove_endpoint(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    endpoint_store.remove_endpoint(endpoint)
    return _settings_list_or_redirect()


@bp.post("/settings/endpoints/<int:endpoint_id>/models")
def refresh_models(endpoint_id: int):
    endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)
    try:
        endpoint_store.models(
            endpoint, max_age_seconds=current_app.config["NUMI_MODELS_CACHE_SECONDS"], refresh=True
        )
        problem = endpoint_store.missing_default_model(endpoint)
        status = ("error", problem) if problem else ("ok", f"Connected: {len(endpoint.models)} models available.")
    except NumiError as exc:
        status = ("error", exc.message)
    return render_template("partials/_endpoint.html", endpoint=endpoint, status=status)


def _settings_list_or_redirect():
    if is_htmx():
        return render_template(
            "partials/_endpoint_list.html", endpoints=endpoint_store.list_endpoints(g.user.id)
        )
    return redirect(url_for("pages.settings"))
