"""The WebSocket route `/ws/<chat_id>`: checks happen before the upgrade.

The Host, Origin and user checks run in the app's before_request guards (web.security);
the chat's owner is checked here before flask-sock performs the handshake, so a foreign
or deleted chat is refused with a plain 404 and no socket is opened.
"""

from __future__ import annotations

import json

from flask import Blueprint, g, request

from ..chat import chats
from ..extensions import sock

bp = Blueprint("ws", __name__)


@bp.before_request
def _owner_check():
    chat_id = (request.view_args or {}).get("chat_id")
    if chat_id is not None:
        chats.get_chat(g.user.id, chat_id)


@sock.route("/ws/<chat_id>", bp=bp)
def chat_socket(ws, chat_id: str):
    """Loop on client messages; each bad one gets an `error` event and changes nothing."""
    while True:
        raw = ws.receive()
        if raw is None:
            return
        try:
            message = json.loads(raw)
        except (TypeError, ValueError):
            _send_error(ws, "invalid_json", "The message is not valid JSON.")
            continue
        if not isinstance(message, dict) or message.get("type") not in CLIENT_TYPES:
            _send_error(ws, "unknown_type", "Unknown message type.")
            continue
        _send_error(ws, "not_available", "Turns are not available yet.")


CLIENT_TYPES = ("send", "stop", "resume", "approve")


def _send_error(ws, code: str, message: str) -> None:
    ws.send(json.dumps({"event_id": None, "turn_id": None, "type": "error", "data": {"code": code, "message": message}}))
