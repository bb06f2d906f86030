"""Routes of a chat's queued follow-ups (numi.chat.followups): see, edit, remove, resume.

    GET    /api/session/<chat>/queue              {items, paused}
    PATCH  /api/session/<chat>/queue/<id>         {message}: new text, until it starts
    DELETE /api/session/<chat>/queue/<id>         remove one
    DELETE /api/session/<chat>/queue              remove all
    POST   /api/session/<chat>/queue/resume       start the first one now (a paused queue)
and the page's HTMX forms, answering with the queue partial:
    POST   /c/<chat>/queue/<id>                   edit
    POST   /c/<chat>/queue/<id>/delete            remove
    POST   /c/<chat>/queue/resume                 resume
Every change is published to the chat's clients as a `queue` event.
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, render_template, request

from ..agent.followup_queue import publish_queue, start_next
from ..chat import chats, followups
from ..extensions import turn_manager
from .inputs import request_data

bp = Blueprint("followups", __name__)


def _queue(chat_id: str) -> dict:
    items = [item.to_dict() for item in followups.list_items(g.user.id, chat_id)]
    running = turn_manager().running_or_unknown(chat_id)
    return {"items": items, "paused": bool(items) and running is False}


def _answer(chat, status: int = 200, **extra):
    """The HTMX form's answer (the queue partial) or the JSON one; tells the other clients."""
    queue = _queue(chat.id)
    publish_queue(chat.id, g.user.id, paused=queue["paused"])
    if extra.pop("html", False):
        return render_template(
            "partials/_queue.html", chat=chat, queue=queue["items"], paused=queue["paused"]
        )
    return jsonify(**queue, **extra), status


@bp.get("/api/session/<chat_id>/queue")
def show(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    return jsonify(_queue(chat_id))


@bp.patch("/api/session/<chat_id>/queue/<int:item_id>")
@bp.post("/c/<chat_id>/queue/<int:item_id>", endpoint="edit_form")
def edit(chat_id: str, item_id: int):
    chat = chats.get_chat(g.user.id, chat_id)
    data = request_data()
    item = followups.edit(
        g.user.id,
        chat.id,
        item_id,
        data.get("message", data.get("text")),
        current_app.config["NUMI_MAX_MESSAGE_CHARS"],
    )
    return _answer(chat, item=item.to_dict(), html=_is_form())


@bp.delete("/api/session/<chat_id>/queue/<int:item_id>")
@bp.post("/c/<chat_id>/queue/<int:item_id>/delete", endpoint="remove_form")
def remove(chat_id: str, item_id: int):
    chat = chats.get_chat(g.user.id, chat_id)
    followups.remove(g.user.id, chat.id, item_id)
    return _answer(chat, deleted=1, html=_is_form())


@bp.delete("/api/session/<chat_id>/queue")
def clear(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return _answer(chat, deleted=followups.clear(chat.id))


@bp.post("/api/session/<chat_id>/queue/resume")
@bp.post("/c/<chat_id>/queue/resume", endpoint="resume_form")
def resume(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    started = start_next(chat.id)
    return _answer(chat, started=started, html=_is_form())


def _is_form() -> bool:
    return request.path.startswith("/c/")
