"""Attachment routes: upload, owner-only download, thumbnails.

    POST /api/upload                        multipart `file` (one or more) -> 201 {attachments: [...]}
    GET  /api/attachments/<id>              the file, to its owner only (404 for anyone else)
    GET  /api/attachments/<id>/thumbnail    a small PNG of an image attachment

An upload is the user's (or a model's, or a stranger's) bytes served from this site's
origin, so a download must never become an active document here:
- only raster images and PDFs keep their type and show inline (`?download=1` forces a
  download); everything else goes out as `attachment`, text as `text/plain` and the rest as
  `application/octet-stream`: a `.js`, `.css`, `.html` or an uploaded `.svg` is never
  served as script, style or markup;
- an SVG a tool drew (run_python's, stored as `image/svg+xml`) keeps its type so that an
  `<img>` can draw it (an image runs no script), yet still goes out as `attachment`: opened
  directly it downloads, and the policy below would run none of its script anyway;
- every download carries `nosniff` and `Content-Security-Policy: sandbox; default-src
  'none'`, so even a file opened directly runs nothing and loads nothing.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, current_app, g, jsonify, request, send_file

from ..knowledge.index import schedule_indexing
from ..chat import attachments as store
from ..errors import NotFound, invalid

log = logging.getLogger(__name__)

bp = Blueprint("attachments", __name__, url_prefix="/api")

DOWNLOAD_CSP = "sandbox; default-src 'none'"
INLINE_TYPES = (*store.IMAGE_TYPES, "application/pdf")  # never SVG: it can carry script
SVG = "image/svg+xml"


@bp.post("/upload")
def upload():
    files = request.files.getlist("file") or request.files.getlist("files")
    if not files:
        raise invalid("Choose a file to upload (multipart field `file`).", "no_file")
    saved = store.store_uploads(current_app.config, g.user.id, files)
    for attachment in saved:
        _schedule_indexing(attachment.id)
    return jsonify(attachments=[_describe(a) for a in saved]), 201


def _describe(attachment) -> dict:
    data = attachment.to_dict()
    data["is_image"] = store.is_image(attachment)
    data["url"] = f"/api/attachments/{attachment.id}"
    if data["is_image"]:
        data["thumbnail_url"] = f"/api/attachments/{attachment.id}/thumbnail"
    return data


def _schedule_indexing(attachment_id: int) -> None:
    """Hand a new upload to document search (issue 7)."""
    try:
        schedule_indexing(current_app._get_current_object(), attachment_id)
    except Exception:  # indexing is a background nicety: the upload itself succeeded
        log.exception("could not schedule indexing of attachment %s", attachment_id)


@bp.get("/attachments/<int:attachment_id>")
def download(attachment_id: int):
    attachment = store.get_attachment(g.user.id, attachment_id)
    path = store.file_path(current_app.config["NUMI_DATA_DIR"], attachment)
    if not path.is_file():
        raise NotFound("file")
    inline = attachment.mime in INLINE_TYPES and request.args.get("download") is None
    response = send_file(
        path,
        mimetype=served_type(attachment.mime),
        as_attachment=not inline,
        download_name=attachment.filename,
        conditional=True,
        max_age=0,
    )
    response.headers["Cache-Control"] = "private, no-cache"
    return _inert(response)


def served_type(mime: str) -> str:
    """The Content-Type a download goes out with: images and PDF as they are, any text
    (scripts, styles, HTML, SVG that was stored as text) as plain text, the rest as bytes."""
    if mime in INLINE_TYPES or mime == SVG:
        return mime
    if mime.startswith("text/") or mime == "application/json":
        return "text/plain"  # send_file adds "; charset=utf-8" to text types itself
    return "application/octet-stream"


def _inert(response: Response) -> Response:
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = DOWNLOAD_CSP
    return response


@bp.get("/attachments/<int:attachment_id>/thumbnail")
def thumbnail(attachment_id: int):
    attachment = store.get_attachment(g.user.id, attachment_id)
    if (
        not store.is_image(attachment)
        or not store.file_path(current_app.config["NUMI_DATA_DIR"], attachment).is_file()
    ):
        raise NotFound("thumbnail")
    data = store.thumbnail(current_app.config["NUMI_DATA_DIR"], attachment)
    if data is None:  # no Pillow: the original is small enough for a browser to scale
        return download(attachment_id)
    return _inert(
        Response(data, mimetype="image/png", headers={"Cache-Control": "private, max-age=86400"})
    )
