"""Artifacts (numi.artifacts): the frame a preview runs in, and an answer's artifacts by version.

    GET /artifact-frame                         the document an artifact runs in
    GET /c/<chat>/messages/<id>/artifacts       the artifacts of every version of an answer

The frame is the heart of it. The page makes an `<iframe sandbox="allow-scripts">` (no
`allow-same-origin`: an opaque origin) on this route and posts the artifact's source to it;
the document writes it into itself. Its own policy (`FRAME_CSP`) sandboxes it again for a
frame opened any other way, lets it load no resource but the vendored Mermaid and inline
code, and lets it connect nowhere, so a script the model wrote runs and still cannot read
the page, its cookie or the API, navigate the top window, open pop-ups or submit forms. The
frame document carries no data (the source arrives by postMessage), so it is public.
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, render_template, url_for
from sqlalchemy import select

from ..chat import chats, edits
from ..chat.versions import version_info
from ..extensions import db
from ..models import Message
from ..render import artifacts

bp = Blueprint("artifacts", __name__)

MERMAID_FILE = "vendor/mermaid-11.17.2.min.js"


def frame_csp(mermaid_url: str) -> str:
    """The artifact frame's policy; `mermaid_url` is absolute (a policy source has a host).

    `webrtc 'block'` (CSP Level 3) closes the one way out that `default-src` does not
    cover, peer connections and their STUN/TURN traffic, in browsers that implement it.
    Chromium (156) does not yet: it ignores the directive with a console note, and an
    artifact there can still send WebRTC packets (README, Artifacts)."""
    return (
        "sandbox allow-scripts; default-src 'none'; "
        f"script-src 'unsafe-inline' {mermaid_url}; style-src 'unsafe-inline'; img-src data:; "
        "font-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'; "
        "webrtc 'block'"
    )


# Powerful features an artifact never gets, whatever a browser's defaults for a framed
# document: cameras and microphones (the media half of WebRTC), the screen, devices,
# location, payments, credentials. Only features Chromium knows (an unknown one is an
# error in its console).
FRAME_PERMISSIONS = ", ".join(
    f"{feature}=()"
    for feature in (
        "camera",
        "microphone",
        "display-capture",
        "geolocation",
        "usb",
        "serial",
        "hid",
        "bluetooth",
        "midi",
        "payment",
        "publickey-credentials-get",
        "clipboard-read",
        "clipboard-write",
        "screen-wake-lock",
        "idle-detection",
        "local-fonts",
        "window-management",
        "xr-spatial-tracking",
    )
)


@bp.get("/artifact-frame")
def frame():
    mermaid = url_for("static", filename=MERMAID_FILE, _external=True)
    response = current_app.make_response(render_template("artifact_frame.html", mermaid=mermaid))
    # The policy matches a source by its path; the fingerprint query is ignored by it.
    response.headers["Content-Security-Policy"] = frame_csp(mermaid.split("?", 1)[0])
    response.headers["Permissions-Policy"] = FRAME_PERMISSIONS
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.get("/c/<chat_id>/messages/<int:message_id>/artifacts")
def message_artifacts(chat_id: str, message_id: int):
    """The artifacts of `message_id` and of each of its versions, oldest version first,
    with `n` the position of `message_id` among them (‹ n/m › in the artifact panel)."""
    chat = chats.get_chat(g.user.id, chat_id)
    message = edits.get_message(chat, message_id, any_version=True)
    version = version_info(chat.id, [message]).get(message.id)
    ids = version.ids if version else [message.id]
    rows = {
        m.id: m
        for m in db.session.scalars(
            select(Message).where(
                Message.chat_id == chat.id, Message.id.in_(ids), Message.deleted_at.is_(None)
            )
        )
    }
    versions = [
        {
            "message_id": i,
            "artifacts": [a.to_dict() for a in artifacts(rows[i].content)]
            if rows[i].role == "assistant"
            else [],
        }
        for i in ids
        if i in rows
    ]
    return jsonify(
        message_id=message.id,
        n=[v["message_id"] for v in versions].index(message.id) + 1,
        versions=versions,
    )
