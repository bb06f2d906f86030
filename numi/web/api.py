"""The JSON API (the routes of the second seed). Errors answer `{error: {code, message}}`."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, request

from .. import endpoints as endpoint_store
from ..chat import chats, organising, projects
from ..chat import temporary as temporary_chats
from ..chat.versions import version_info
from ..setting_values import parse_bool
from ..errors import NumiError, turn_running
from ..extensions import db, turn_manager
from . import temporary as temporary_routes
from .inputs import int_arg, request_data

bp = Blueprint("api", __name__, url_prefix="/api")

CHAT_FIELDS = (
    "title",
    "endpoint_id",
    "model",
    "settings",
    "system_prompt",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "tools",
    "project_id",
)


def _chat_fields(data: dict, current_tools: list[str] | None = None) -> dict:
    fields = {key: data[key] for key in CHAT_FIELDS if key in data}
    if "name" in data and "title" not in fields:  # the seed's form field for the title
        fields["title"] = data["name"]
    if "selected_endpoint_id" in data and "endpoint_id" not in fields:
        fields["endpoint_id"] = data["selected_endpoint_id"]
    for key in ("rag", "use_rag"):  # the seed's switch for document search ("rag" on its form)
        if data.get(key) not in (None, ""):
            on = parse_bool(data[key], key)
            tools = fields.get("tools", current_tools or [])
            if not isinstance(tools, list):
                break  # the tools field itself is malformed: its own check reports it
            fields["tools"] = [t for t in tools if t != DOCUMENT_SEARCH] + (
                [DOCUMENT_SEARCH] if on else []
            )
    return fields


DOCUMENT_SEARCH = "search_documents"


@bp.post("/session")
def create_session():
    data = request_data()
    temporary = temporary_chats.temporary_flag(data.get("temporary"))
    fields = _chat_fields(data)
    if data.get("project_id") is not None:  # a new chat in a project takes its defaults
        project = projects.chosen_project(g.user.id, data["project_id"])
        fields = projects.new_chat_fields(project, fields)
    chat = chats.create_chat(g.user.id, fields, current_app.config, temporary=temporary)
    temporary_routes.started(chat)
    return jsonify(chat.to_dict()), 201


@bp.get("/sessions")
def list_sessions():
    config = current_app.config
    limit = int_arg("limit", config["NUMI_PAGE_SIZE_CHATS"], low=1, high=500)
    query = (request.args.get("q") or "")[: config["NUMI_MAX_TITLE_CHARS"]]
    # view: "all" (every live chat, the default), "sidebar" (pinned ones apart in `pinned`,
    # archived ones left out) or "archived"; tag: only chats with that tag.
    view = request.args.get("view") or "all"
    if view not in ("all", "sidebar", "archived"):
        raise NumiError("invalid_view", "view must be all, sidebar or archived.", 400)
    page = chats.list_chats(
        g.user.id,
        limit=limit,
        cursor=request.args.get("cursor") or None,
        query=query,
        tag=(request.args.get("tag") or "")[: organising.MAX_TAG_CHARS],
        view=view,
        project_id=_project_filter(),
    )
    body = {"sessions": [c.to_dict() for c in page.items], "next_cursor": page.next_cursor}
    if view == "sidebar":
        body["pinned"] = [c.to_dict() for c in page.pinned]
    return jsonify(body)


def _project_filter() -> int | None:
    """`?project_id=`: one of the user's projects' chats only (`unknown_project` otherwise)."""
    raw = request.args.get("project_id") or ""
    if not raw:
        return None
    return chats.project_ref(g.user.id, int(raw) if raw.isdigit() else -1)


@bp.get("/session/<chat_id>")
def get_session(chat_id: str):
    return jsonify(chats.get_chat(g.user.id, chat_id).to_dict())


@bp.patch("/session/<chat_id>")
def update_session(chat_id: str):
    data = request_data()
    changes = organising.validate(
        data
    )  # pinned, archived, tags: checked before anything is written
    if "temporary" in data:
        temporary_chats.refuse_on_existing(data["temporary"])  # only `false` (keep it) passes
    current = chats.get_chat(g.user.id, chat_id).settings.get("tools")
    chat = chats.update_chat(g.user.id, chat_id, _chat_fields(data, current), current_app.config)
    organising.apply(g.user.id, chat, changes)
    if "temporary" in data:
        chat.temporary = False
    db.session.commit()
    return jsonify(chat.to_dict())


@bp.delete("/session/<chat_id>")
def delete_session(chat_id: str):
    if turn_manager().is_running(chat_id):
        chats.get_chat(g.user.id, chat_id)  # a foreign id stays a 404, not a 409
        raise turn_running()
    chats.delete_chat(g.user.id, chat_id)
    return jsonify(ok=True)


@bp.get("/history/<chat_id>")
def history(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    limit = int_arg("limit", current_app.config["NUMI_PAGE_SIZE_MESSAGES"], low=1, high=1000)
    page = chats.list_messages(chat, limit=limit, before_id=int_arg("before", low=1))
    versions = version_info(chat.id, page.items)
    return jsonify(
        messages=[
            {**m.to_dict(), "version": versions[m.id].to_dict() if m.id in versions else None}
            for m in page.items
        ],
        next_cursor=page.next_cursor,
    )


@bp.get("/endpoints")
def list_endpoints():
    return jsonify(
        endpoints=[
            endpoint_store.endpoint_dict(e, g.user)
            for e in endpoint_store.list_endpoints(g.user.id)
        ]
    )


@bp.post("/endpoints")
def add_endpoint():
    endpoint = endpoint_store.add_endpoint(
        g.user.id,
        g.user.is_admin,
        request_data(),
        max_name=current_app.config["NUMI_MAX_NAME_CHARS"],
    )
    return jsonify(endpoint_store.endpoint_dict(endpoint)), 201


@bp.patch("/endpoints/<int:endpoint_id>")
def update_endpoint(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    endpoint_store.update_endpoint(
        endpoint, request_data(), max_name=current_app.config["NUMI_MAX_NAME_CHARS"]
    )
    if endpoint.models_fetched_at is None:  # pointed elsewhere: the new server's list
        endpoint_store.fetch_models(endpoint)
    return jsonify(endpoint_store.endpoint_dict(endpoint))


@bp.delete("/endpoints/<int:endpoint_id>")
def delete_endpoint(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    endpoint_store.remove_endpoint(endpoint)
    return jsonify(ok=True)


@bp.get("/endpoints/<int:endpoint_id>/models")
def endpoint_models(endpoint_id: int):
    endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)
    models = endpoint_store.models(
        endpoint,
        max_age_seconds=current_app.config["NUMI_MODELS_CACHE_SECONDS"],
        refresh=parse_bool(request.args.get("refresh")),
    )
    return jsonify(models=models, default_model=endpoint.default_model)
