"""Temporary chats on the web: "Keep this chat", the discard when another chat starts, and
the sweep of idle ones (numi/chat/temporary.py holds the rules).

    POST /c/<chat_id>/keep      make a temporary chat a normal one (the chat page's banner)

A temporary chat's pages are `no-store` (`no_store_if_temporary`): no cache keeps them.

The sweep runs before a request at most once a minute per process: one indexed query, and
an idle temporary chat is gone before its user can see it again.
"""

from __future__ import annotations

import time

from flask import (
    Blueprint,
    Flask,
    Response,
    after_this_request,
    current_app,
    g,
    redirect,
    request,
    url_for,
)

from ..chat import chats, temporary
from ..extensions import turn_manager
from ..services import services
from .request_kind import is_htmx

bp = Blueprint("temporary", __name__)

SWEEP_EVERY_SECONDS = 60
_SKIPPED = {"static", "pages.healthz", "installable.service_worker", "installable.manifest"}


def init_app(app: Flask) -> None:
    app.before_request(_sweep)


def _sweep() -> None:
    if request.endpoint in _SKIPPED:
        return
    now = time.monotonic()
    state = services()
    if now - state.temporary_swept_at < SWEEP_EVERY_SECONDS:
        return
    state.temporary_swept_at = now
    temporary.expire(current_app.config["NUMI_TEMPORARY_CHAT_HOURS"], turn_manager().is_running)


def no_store_if_temporary(chat) -> None:
    """Keep this request's response (a page of `chat`) out of every cache when the chat is
    temporary: the service worker's (static/sw.js) and the browser's, back/forward
    included. A discarded temporary chat must not open from one of them."""
    if chat.temporary:
        after_this_request(_no_store)


def _no_store(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-store"
    return response


def started(chat) -> None:
    """The user started `chat`: their other temporary chats go."""
    temporary.discard_others(chat.user_id, chat.id, turn_manager().is_running)


@bp.post("/c/<chat_id>/keep")
def keep_chat(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    temporary.keep(chat)
    if is_htmx():
        # The sidebar lists it now and the banner goes: the page is rendered again.
        return "", 204, {"HX-Refresh": "true"}
    return redirect(url_for("pages.chat_view", chat_id=chat.id))
