"""Moving chats in and out: export downloads, the JSON import route and the Import form.

The import routes take a chat export (any format `numi.chat.importer` reads), a saved
prompts file (`numi.prompts`, see numi/prompts.py), a memories file (`numi.memories`) or a
project (`numi.project`, numi/chat/project_transfer.py), told apart by the document's format.
An import runs as a background job (numi/web/import_runner.py): the upload returns at once
with the job, whose status (`/api/imports/<id>`) or progress page (`/imports/<id>`) shows
how far it got and what it imported, or why it was refused."""

from __future__ import annotations

import io
from typing import BinaryIO

from flask import (
    Blueprint,
    current_app,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    send_file,
    url_for,
)

from ..chat import import_jobs
from ..chat.export import export_chat
from ..errors import invalid
from .import_runner import is_blank, spooled, start_import
from .request_kind import is_htmx

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
    """Start importing the uploaded file in the background: 202 with the job to poll.
    `?preview=1` reads and checks it the same way and writes nothing (the job's result is
    `{preview: {kind, format, chats, messages, imported_before}}`)."""
    job = start_import(
        current_app._get_current_object(),
        g.user.id,
        _uploaded_file(),
        preview=request.args.get("preview") in ("1", "true"),
    )
    response = jsonify(job=job.to_dict())
    response.headers["Location"] = url_for("transfer.import_status", job_id=job.id)
    return response, 202


@bp.get("/api/imports/<int:job_id>")
def import_status(job_id: int):
    """An import job's state, progress, and its result or error once it ended."""
    return jsonify(job=import_jobs.get_job(g.user.id, job_id).to_dict())


@bp.post("/import")
def import_page():
    """The Import form: a multipart upload; its progress page follows the job. Its first
    step (`step=preview`) reads the file and writes nothing: in Settings (HTMX) the preview
    appears under the form with the button that imports the same file; without JavaScript
    it is the progress page's."""
    preview = request.form.get("step") == "preview"
    job = start_import(
        current_app._get_current_object(), g.user.id, _uploaded_file(), preview=preview
    )
    if is_htmx():
        if preview:
            return render_template("partials/_import_progress.html", job=job, confirm=True)
        return "", 200, {"HX-Redirect": url_for("transfer.import_progress", job_id=job.id)}
    return redirect(url_for("transfer.import_progress", job_id=job.id), code=303)


@bp.get("/imports/<int:job_id>")
def import_progress(job_id: int):
    """The import's progress page (its HTMX poll swaps in the progress part). Once the
    import is done it leads to what was imported; a refusal shows its message."""
    job = import_jobs.get_job(g.user.id, job_id)
    if job.state == "done" and not _stays(job):
        url = _result_page(job)
        if is_htmx():
            return "", 200, {"HX-Redirect": url}
        return redirect(url, code=303)
    template = "partials/_import_progress.html" if is_htmx() else "import_job.html"
    # `confirm`: polled from the Settings form, whose file the preview's button imports.
    return render_template(template, job=job, confirm=request.args.get("confirm") == "1")


def _stays(job) -> bool:
    """A preview, or an import that added nothing, stays on its page to say so."""
    return "preview" in job.result or (job.kind == "chats" and job.result["chat"] is None)


def _result_page(job) -> str:
    """Where a finished import leads: its chat, its project, or the settings it added to."""
    result = job.result
    if job.kind == "project":
        return url_for("project_pages.project_view", project_id=result["project"]["id"])
    if job.kind == "chats":
        return url_for("pages.chat_view", chat_id=result["chat"]["id"])
    return url_for("pages.settings", section="prompts" if job.kind == "prompts" else "memory")


def _uploaded_file() -> BinaryIO:
    """The multipart field "file", or the raw body (decoded by the job), as a file of the
    job's own, never read whole here (a 200 MB export goes to disk)."""
    if request.mimetype == "multipart/form-data":
        upload = request.files.get("file")
        if upload is None or not upload.filename:
            raise invalid("Choose an export file to import.", "invalid_import")
        copy = spooled(upload.stream)
    else:
        copy = spooled(request.stream)
    if is_blank(copy):
        copy.close()
        raise invalid("The file is empty.", "invalid_import")
    return copy
