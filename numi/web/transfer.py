"""Moving chats in and out: export downloads, the JSON import route and the Import form.

The import routes take a chat export (any format `numi.chat.importer` reads), a saved
prompts file (`numi.prompts`, see numi/prompts.py), a memories file (`numi.memories`) or a
project (`numi.project`, numi/chat/project_transfer.py), told apart by the document's format."""

from __future__ import annotations

import io

from flask import Blueprint, current_app, g, jsonify, redirect, request, send_file, url_for

from .. import prompts as prompt_store
from ..chat import importer, memories as memory_store, project_transfer
from ..chat.export import export_chat
from ..errors import invalid
from .inputs import decode_json

bp = Blueprint("transfer", __name__)


@bp.get("/api/session/<chat_id>/export")
def export_session(chat_id: str):
    exported = export_chat(g.user.id, chat_id, request.args.get("fmt", "md"))
    return send_file(
        io.BytesIO(exported.body.encode("utf-8")),
        mimetype=exported.mimetype,
        as_attachment=True,
        download_name=exported.filename,
        max_age=0,
    )


@bp.post("/api/import")
def import_session():
    document = _uploaded_document()
    if prompt_store.is_prompts_document(document):
        result = prompt_store.import_prompts(g.user.id, document)
        return jsonify(
            prompts=[p.to_dict() for p in result["created"]],
            skipped=result["skipped"],
            renamed=result["renamed"],
        ), 201
    if memory_store.is_memories_document(document):
        result = memory_store.import_memories(g.user.id, document, current_app.config)
        return jsonify(
            memories=[m.to_dict() for m in result["created"]], skipped=result["skipped"]
        ), 201
    if project_transfer.is_project_document(document):
        project = _import_project(document)
        return jsonify(project=project.to_dict()), 201
    created = importer.import_chats(g.user.id, document, current_app.config)
    return jsonify(chat=created[0].to_dict(), chats=[c.to_dict() for c in created]), 201


@bp.post("/import")
def import_page():
    """The Import form: a multipart upload; a bad file shows the error page or toast."""
    document = _uploaded_document()
    if prompt_store.is_prompts_document(document):
        prompt_store.import_prompts(g.user.id, document)
        return redirect(url_for("pages.settings", section="prompts"), code=303)
    if memory_store.is_memories_document(document):
        memory_store.import_memories(g.user.id, document, current_app.config)
        return redirect(url_for("pages.settings", section="memory"), code=303)
    if project_transfer.is_project_document(document):
        project = _import_project(document)
        return redirect(url_for("project_pages.project_view", project_id=project.id), code=303)
    created = importer.import_chats(g.user.id, document, current_app.config)
    return redirect(url_for("pages.chat_view", chat_id=created[0].id), code=303)


def _import_project(document):
    from .attachments import _schedule_indexing

    project, file_ids = project_transfer.import_project(g.user.id, document, current_app.config)
    for attachment_id in file_ids:
        _schedule_indexing(attachment_id)
    return project


def _uploaded_document():
    """The decoded JSON of the multipart field "file", or of the raw body."""
    if request.mimetype == "multipart/form-data":
        upload = request.files.get("file")
        if upload is None or not upload.filename:
            raise invalid("Choose an export file to import.", "invalid_import")
        return _decode(upload.read())
    return _decode(request.get_data(cache=False))


def _decode(raw: bytes) -> object:
    return decode_json(
        raw,
        max_depth=current_app.config["NUMI_MAX_JSON_DEPTH"],
        subject="The file",
        code="invalid_import",
    )
