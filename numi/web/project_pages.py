"""The pages and forms of projects and memories (issue 21); every form works without JS.

GET  /p/<id>                       the project: its chats, files, instructions, memories
POST /projects                     a new project (the sidebar's "New project")
POST /p/<id>/edit                  name, instructions
POST /p/<id>/defaults              model, tools, workspace of new chats; the fallback chain;
                                   the embedding model of its files (a change re-indexes them)
POST /p/<id>/chats                 a new chat in the project, with its defaults
POST /p/<id>/files                 upload files to the project
POST /p/<id>/files/<aid>/remove    a file leaves the project
POST /p/<id>/delete                chats=keep|delete (the dialog asks which)
POST /c/<chat>/project             move a chat into a project, or out (project_id "")
POST /settings/memory              memory on or off
POST /memories                     a new memory (yours, or a project's with project_id)
POST /memories/<id>/edit, /memories/<id>/delete
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, redirect, render_template, request, url_for

from .. import endpoints as endpoint_store
from ..chat import (
    attachments as attachment_store,
    chats,
    memories as memory_store,
    organising,
    projects as project_store,
)
from ..setting_values import parse_bool
from ..errors import invalid, turn_running
from ..extensions import turn_manager
from ..chat.embedding_choice import from_form
from ..knowledge import embedding
from .attachments import _describe, _schedule_indexing
from .fallbacks import editor_rows
from .inputs import request_data
from .pages.base import running_ids
from .pages.chat_forms import chat_tools_context, tool_settings
from .projects import reindex_if_model_changed
from .request_kind import is_htmx
from .sidebar import sidebar_context

bp = Blueprint("project_pages", __name__)


@bp.get("/p/<int:project_id>")
def project_view(project_id: int):
    return _project_page(project_store.get_project(g.user.id, project_id))


def _project_page(project, defaults: dict | None = None, fallback_rows: list | None = None):
    """The project page; `defaults` and `fallback_rows` show a draft of the defaults form
    (a fallback row button pressed without JS) instead of what is stored."""
    sidebar = chats.list_chats(g.user.id, limit=current_app.config["NUMI_PAGE_SIZE_CHATS"])
    defaults = project.settings if defaults is None else defaults
    return render_template(
        "project.html",
        chat=None,
        project=project,
        defaults=defaults,
        fallback_rows=(defaults.get("fallbacks") or []) if fallback_rows is None else fallback_rows,
        project_chats=project_store.project_chats(g.user.id, project.id),
        files=[_describe(a) for a in project_store.project_files(g.user.id, project.id)],
        memories=memory_store.list_memories(g.user.id, project_id=project.id),
        memory_on=g.user.memory_enabled,
        sidebar=sidebar,
        running_ids=running_ids(sidebar),
        endpoints=endpoint_store.list_endpoints(g.user.id),
        tags=organising.user_tags(g.user.id),
        **embedding_context(project),
        **sidebar_context(),
        **chat_tools_context(),
    )


@bp.post("/projects")
def create_project():
    data = request_data()
    project = project_store.create_project(
        g.user.id,
        {"name": data.get("name"), "instructions": data.get("instructions") or ""},
        current_app.config,
    )
    return _go(url_for("project_pages.project_view", project_id=project.id))


@bp.post("/p/<int:project_id>/edit")
def edit_project(project_id: int):
    data = request_data()
    fields = {k: data[k] for k in ("name", "instructions") if k in data}
    project_store.update_project(g.user.id, project_id, fields, current_app.config)
    return _go(url_for("project_pages.project_view", project_id=project_id) + "#instructions")


@bp.post("/p/<int:project_id>/defaults")
def project_defaults(project_id: int):
    """The defaults form: the model, tools and workspace of new chats, and the project's
    fallback chain. A fallback row button shows the edited form and saves nothing; Save
    validates the whole form (a bad field changes nothing) and saves it."""
    project = project_store.get_project(g.user.id, project_id)
    data = request_data()
    defaults = dict(project.settings)
    if "route" in data:
        for key in project_store.ROUTE_KEYS:
            defaults.pop(key, None)
        endpoint_id, _, model = (data.get("route") or "").partition(":")
        if endpoint_id:
            defaults.update(endpoint_id=_number_or_text(endpoint_id), model=model)
    defaults.update(tool_settings(data))
    if "use_documents" in data:  # "" is no choice: automatically
        defaults["use_documents"] = data["use_documents"] or None
    if "embedding" in data:  # "" is no choice: the user's model of Settings → Documents
        defaults["embedding"] = from_form(data["embedding"], data.get("embedding_model")) or None
    if "fallbacks_shown" in request.form:
        rows, editing = editor_rows(request.form)
        if editing:
            if is_htmx():
                return _defaults_form(project, defaults, rows)
            return _project_page(project, defaults, rows)
        defaults["fallbacks"] = rows
    before = project.settings.get("embedding")
    project = project_store.update_project(
        g.user.id, project_id, {"settings": defaults}, current_app.config
    )
    reindex_if_model_changed(before, project)
    if not is_htmx():
        return redirect(
            url_for("project_pages.project_view", project_id=project_id) + "#defaults", code=303
        )
    return _defaults_form(project, project.settings, None, saved=True)


def _defaults_form(project, defaults: dict, rows: list | None, saved: bool = False) -> str:
    return render_template(
        "partials/_project_defaults.html",
        project=project,
        defaults=defaults,
        fallback_rows=(defaults.get("fallbacks") or []) if rows is None else rows,
        endpoints=endpoint_store.list_endpoints(g.user.id),
        saved=saved,
        **embedding_context(project),
        **chat_tools_context(),
    )


def embedding_context(project) -> dict:
    """The defaults form's embedding model picker: the endpoints that serve /v1/embeddings,
    whether the local model is installed, and how the project's files are searched now."""
    return {
        "embedding_local": embedding.local_installed(),
        "embedding_endpoints": [
            e
            for e in endpoint_store.list_endpoints(g.user.id)
            if e.kind in embedding.EMBEDDING_KINDS
        ],
        "project_search": embedding.status_text(g.user, project),
    }


def _number_or_text(value: str):
    """An endpoint id from the model picker as the number it names (so the draft form
    shows it chosen); anything else as given, for the cleaner to refuse."""
    return int(value) if value.isdigit() else value


@bp.post("/p/<int:project_id>/chats")
def new_chat(project_id: int):
    project = project_store.get_project(g.user.id, project_id)
    fields = project_store.new_chat_fields(project, {"title": "New chat"})
    chat = chats.create_chat(g.user.id, fields, current_app.config)
    return _go(url_for("pages.chat_view", chat_id=chat.id))


@bp.post("/p/<int:project_id>/files")
def upload_files(project_id: int):
    project_store.get_project(g.user.id, project_id)
    files = [f for f in request.files.getlist("file") if f.filename]
    if not files:
        raise invalid("Choose a file to upload.", "no_file")
    for attachment in attachment_store.store_uploads(current_app.config, g.user.id, files):
        project_store.add_file(g.user.id, project_id, attachment.id)
        _schedule_indexing(attachment.id)
    return _go(url_for("project_pages.project_view", project_id=project_id) + "#files")


@bp.post("/p/<int:project_id>/files/<int:attachment_id>/remove")
def remove_file(project_id: int, attachment_id: int):
    project_store.remove_file(g.user.id, project_id, attachment_id)
    return _go(url_for("project_pages.project_view", project_id=project_id) + "#files")


@bp.post("/p/<int:project_id>/delete")
def delete_project(project_id: int):
    mode = request_data().get("chats")
    if mode == "delete":
        ids = [c.id for c in project_store.project_chats(g.user.id, project_id, limit=10_000)]
        if ids and turn_manager().running_among(ids):
            raise turn_running()
    project_store.delete_project(g.user.id, project_id, mode)
    return _go(url_for("pages.index"))


@bp.post("/c/<chat_id>/project")
def move_chat(chat_id: str):
    """The chat's Project menu (and the sidebar's drag and drop, without JS): in or out."""
    raw = request_data().get("project_id")
    project_id = None
    if raw not in (None, ""):
        try:
            project_id = int(raw)
        except (TypeError, ValueError):
            project_id = -1  # refused as unknown_project below
    chats.update_chat(g.user.id, chat_id, {"project_id": project_id}, current_app.config)
    # From a sidebar row's "Move to…" (which carries `current`, maybe empty): back to the page
    # the user was on, not to the chat that moved.
    if "current" in request.form:
        current = request.form["current"]
        back = url_for("pages.chat_view", chat_id=current) if current else url_for("pages.index")
        return _go(back)
    return _go(url_for("pages.chat_view", chat_id=chat_id))


# --- memories ------------------------------------------------------------------------------


@bp.post("/settings/memory")
def memory_switch():
    on = parse_bool(request_data().get("memory", "0"), "memory")
    memory_store.set_memory_enabled(g.user.id, on)
    return _go(url_for("pages.settings", section="memory"))


@bp.post("/memories")
def add_memory():
    data = request_data()
    project_id = _project_field(data.get("project_id"))
    memory_store.create_memory(g.user.id, data.get("text"), project_id, current_app.config)
    return _go(_back(project_id))


@bp.post("/memories/<int:memory_id>/edit")
def edit_memory(memory_id: int):
    memory = memory_store.update_memory(
        g.user.id, memory_id, {"text": request_data().get("text")}, current_app.config
    )
    return _go(_back(memory.project_id))


@bp.post("/memories/<int:memory_id>/delete")
def delete_memory(memory_id: int):
    memory = memory_store.get_memory(g.user.id, memory_id)
    project_id = memory.project_id
    memory_store.delete_memory(g.user.id, memory_id)
    return _go(_back(project_id))


def _project_field(raw) -> int | None:
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        return -1  # refused as unknown_project


def _back(project_id: int | None) -> str:
    if project_id is None:
        return url_for("pages.settings", section="memory")
    return url_for("project_pages.project_view", project_id=project_id) + "#memories"


def _go(target: str):
    """A redirect; for htmx, a client-side visit (so the whole page, sidebar included, is new)."""
    if is_htmx():
        return "", 204, {"HX-Location": target}
    return redirect(target, code=303)
