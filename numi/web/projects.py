"""Projects and memories over JSON (issue 21). Another user's project or memory is a 404.

    POST   /api/projects                     {name, instructions?, settings?} -> 201 {id, ...}
    GET    /api/projects                     {projects: [...]} (with chat counts)
    GET    /api/projects/<id>                the project, its chats, files and memories
    PATCH  /api/projects/<id>                {name?, instructions?, settings?}; a changed
                                             settings.embedding re-indexes its files
    DELETE /api/projects/<id>?chats=keep|delete
    GET    /api/projects/<id>/files          {files: [...]}
    POST   /api/projects/<id>/files          multipart `file` (uploads) or {attachment_id}
    DELETE /api/projects/<id>/files/<aid>    the upload stays; it leaves the project
    GET    /api/projects/<id>/export         a `numi.project` document (chats, files, memories)
    GET    /api/memories[?project_id=N|all]  {memory: bool, memories: [...]}
    POST   /api/memories                     {text, project_id?} -> 201
    PATCH  /api/memories/<id>                {text?, project_id?}
    DELETE /api/memories/<id>
    GET    /api/memories/export              a `numi.memories` document

Chats join and leave a project through `project_id` on POST /api/session and PATCH
/api/session/<id> (api.py); the memory switch is `memory` on /api/preferences
(organising.py, via `save_memory_preference`).
"""

from __future__ import annotations

import io
import json

from flask import Blueprint, current_app, g, jsonify, request, send_file

from ..chat import (
    attachments as attachment_store,
    memories as memory_store,
    projects as project_store,
)
from ..chat.project_transfer import export_project
from ..extensions import turn_manager
from ..setting_values import parse_bool
from ..errors import invalid, turn_running
from ..knowledge.index import ensure_indexed
from .attachments import _describe, _schedule_indexing
from .inputs import request_data

bp = Blueprint("projects", __name__, url_prefix="/api")


def project_dict(project, counts: dict[int, int] | None = None) -> dict:
    data = project.to_dict()
    if counts is not None:
        data["chats"] = counts.get(project.id, 0)
    return data


@bp.post("/projects")
def create_project():
    data = request_data()
    fields = {k: data[k] for k in ("name", "instructions", "settings") if k in data}
    project = project_store.create_project(g.user.id, fields, current_app.config)
    return jsonify(project_dict(project)), 201


@bp.get("/projects")
def list_projects():
    counts = project_store.chat_counts(g.user.id)
    return jsonify(
        projects=[project_dict(p, counts) for p in project_store.list_projects(g.user.id)]
    )


@bp.get("/projects/<int:project_id>")
def get_project(project_id: int):
    project = project_store.get_project(g.user.id, project_id)
    body = project_dict(project)
    body["chats"] = [c.to_dict() for c in project_store.project_chats(g.user.id, project.id)]
    body["files"] = [_describe(a) for a in project_store.project_files(g.user.id, project.id)]
    body["memories"] = [
        m.to_dict() for m in memory_store.list_memories(g.user.id, project_id=project.id)
    ]
    return jsonify(body)


@bp.patch("/projects/<int:project_id>")
def update_project(project_id: int):
    data = request_data()
    fields = {k: data[k] for k in ("name", "instructions", "settings") if k in data}
    before = project_store.get_project(g.user.id, project_id).settings.get("embedding")
    project = project_store.update_project(g.user.id, project_id, fields, current_app.config)
    reindex_if_model_changed(before, project)
    return jsonify(project_dict(project))


def reindex_if_model_changed(before, project) -> int:
    """After a save of the project's defaults: when its embedding model changed, its files
    are indexed again with it in the background (the indexer's one path for a changed
    model; full-text search goes on meanwhile). Returns how many are not searchable yet."""
    if project.settings.get("embedding") == before:
        return 0
    ids = project_store.project_file_ids(g.user.id, project.id)
    if not ids:
        return 0
    return ensure_indexed(current_app._get_current_object(), g.user.id, ids, retry=True)


@bp.delete("/projects/<int:project_id>")
def delete_project(project_id: int):
    mode = request.args.get("chats")
    if mode is None and request.is_json:
        mode = request_data().get("chats")  # the one reader: its depth check first
    running = _running_chats(project_id) if mode == "delete" else []
    if running:
        raise turn_running()
    deleted = project_store.delete_project(g.user.id, project_id, mode)
    return jsonify(ok=True, chats=mode, deleted_chats=deleted)


def _running_chats(project_id: int) -> list[str]:
    ids = [c.id for c in project_store.project_chats(g.user.id, project_id, limit=10_000)]
    return list(turn_manager().running_among(ids)) if ids else []


@bp.get("/projects/<int:project_id>/files")
def list_files(project_id: int):
    project = project_store.get_project(g.user.id, project_id)
    return jsonify(files=[_describe(a) for a in project_store.project_files(g.user.id, project.id)])


@bp.post("/projects/<int:project_id>/files")
def add_files(project_id: int):
    project_store.get_project(g.user.id, project_id)  # a foreign project: 404 before any upload
    if request.mimetype == "multipart/form-data":
        files = request.files.getlist("file")
        if not files:
            raise invalid("Choose a file to upload (multipart field `file`).", "no_file")
        stored = attachment_store.store_uploads(current_app.config, g.user.id, files)
        ids = [a.id for a in stored]
    else:
        ids = [request_data().get("attachment_id")]
    added = [project_store.add_file(g.user.id, project_id, i) for i in ids]
    for attachment in added:
        _schedule_indexing(attachment.id)
    return jsonify(files=[_describe(a) for a in added]), 201


@bp.delete("/projects/<int:project_id>/files/<int:attachment_id>")
def remove_file(project_id: int, attachment_id: int):
    project_store.remove_file(g.user.id, project_id, attachment_id)
    return jsonify(ok=True)


@bp.get("/projects/<int:project_id>/export")
def export(project_id: int):
    document = export_project(g.user.id, project_id, current_app.config["NUMI_DATA_DIR"])
    return _download(document, f"project-{project_id}.json")


# --- memories ------------------------------------------------------------------------------


@bp.get("/memories")
def list_memories():
    scope = request.args.get("project_id")
    if scope == "all":
        rows = memory_store.list_memories(g.user.id, every=True)
    elif scope:
        try:
            project = project_store.chosen_project(g.user.id, int(scope))
        except ValueError:
            raise invalid("project_id must be a project's id or all.", "unknown_project") from None
        rows = memory_store.list_memories(g.user.id, project_id=project.id)
    else:
        rows = memory_store.list_memories(g.user.id)
    return jsonify(
        memory=memory_store.memory_enabled(g.user.id), memories=[m.to_dict() for m in rows]
    )


@bp.post("/memories")
def create_memory():
    data = request_data()
    memory = memory_store.create_memory(
        g.user.id, data.get("text"), data.get("project_id"), current_app.config
    )
    return jsonify(memory.to_dict()), 201


@bp.patch("/memories/<int:memory_id>")
def update_memory(memory_id: int):
    data = request_data()
    fields = {k: data[k] for k in ("text", "project_id") if k in data}
    memory = memory_store.update_memory(g.user.id, memory_id, fields, current_app.config)
    return jsonify(memory.to_dict())


@bp.delete("/memories/<int:memory_id>")
def delete_memory(memory_id: int):
    memory_store.delete_memory(g.user.id, memory_id)
    return jsonify(ok=True)


@bp.get("/memories/export")
def export_memories():
    return _download(memory_store.export_document(g.user.id), "memories.json")


def memory_preference(data: dict) -> bool | None:
    """The `memory` key of PATCH /api/preferences, checked (None when absent); kept here so
    that route only hands its body over."""
    return parse_bool(data["memory"], "memory") if "memory" in data else None


def save_memory_preference(on: bool | None) -> None:
    if on is not None:
        memory_store.set_memory_enabled(g.user.id, on)


def _download(document: dict, filename: str):
    body = json.dumps(document, ensure_ascii=False, indent=2)
    return send_file(
        io.BytesIO(body.encode("utf-8")),
        mimetype="application/json",
        as_attachment=True,
        download_name=filename,
        max_age=0,
    )
