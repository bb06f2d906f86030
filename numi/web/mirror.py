"""The Markdown mirror on the web: its JSON API (`/api/mirror`), what Settings → Markdown
mirror shows (the form itself is `pages/settings.py`'s), and the zip of the mirror that the
Export menus offer (`/api/export/markdown.zip`): the same files `numi export --markdown`
writes, each chat's attachments in its `.files` folder included, in one download."""

from __future__ import annotations

import tempfile
import zipfile

from flask import Blueprint, current_app, g, jsonify, send_file

from ..chat import live_mirror, mirror_files
from ..chat.markdown_mirror import ChatFile, chat_files, live_chat_ids
from ..cpu_pool import run_cpu
from ..extensions import db
from .inputs import request_data

bp = Blueprint("mirror", __name__)

# The zip is built in a temporary file that stays in memory up to this size.
_SPOOL_BYTES = 8 * 1024 * 1024


@bp.get("/api/mirror")
def get_mirror():
    return jsonify(_state_json())


@bp.put("/api/mirror")
def put_mirror():
    """Turn the mirror on, or move it: `{"folder": "/full/path"}` (single-user mode; in
    multi-user mode the folder is the admin's root and the user's name)."""
    folder = request_data().get("folder")
    live_mirror.turn_on(current_app, g.user, folder if isinstance(folder, str) else None)
    return jsonify(_state_json())


@bp.delete("/api/mirror")
def delete_mirror():
    live_mirror.turn_off(g.user)
    return jsonify(_state_json())


@bp.get("/api/export/markdown.zip")
def markdown_zip():
    """Every live chat of the user as the mirror's Markdown files, zipped."""
    files = chat_files(g.user.id, live_chat_ids(g.user.id))
    db.session.commit()  # no transaction held while the zip is compressed
    return send_file(
        run_cpu(_zip, files),
        mimetype="application/zip",
        as_attachment=True,
        download_name="numi-markdown.zip",
        max_age=0,
    )


def mirror_context() -> dict:
    """What Settings → Markdown mirror shows for the signed-in user."""
    return {"mirror": live_mirror.state(current_app.config, g.user)}


def _state_json() -> dict:
    state = live_mirror.state(current_app.config, g.user)
    return {"folder": state.folder, "paused": state.paused, "chooses_folder": state.chooses_folder}


def _zip(files: list[ChatFile]):
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)
    with zipfile.ZipFile(spool, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            archive.writestr(file.path.as_posix(), file.body)
            folder = mirror_files.files_dir(file.path)
            for attached in file.attachments:
                if attached.source.is_file():  # a stored file gone missing is left out
                    archive.write(attached.source, (folder / attached.name).as_posix())
    spool.seek(0)
    return spool
