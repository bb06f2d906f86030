"""The chat list (sidebar pages, the running chats) and the template globals its items use."""

from __future__ import annotations

import re
from datetime import timedelta

from flask import current_app, g, jsonify, redirect, render_template, request, url_for

from ...chat import chats, organising
from ...extensions import turn_manager
from ...models import utcnow
from ..request_kind import is_htmx
from .base import bp, running_ids


@bp.get("/chats")
def chat_list():
    config = current_app.config
    query = (request.args.get("q") or "")[: config["NUMI_MAX_TITLE_CHARS"]]
    tag = (request.args.get("tag") or "")[: organising.MAX_TAG_CHARS]
    page = chats.list_chats(
        g.user.id,
        limit=config["NUMI_PAGE_SIZE_CHATS"],
        cursor=request.args.get("cursor") or None,
        query=query,
        tag=tag,
    )
    current = request.args.get("current")
    if is_htmx():
        # `group`: the date group the previous page ended in, so its header is not repeated.
        return render_template(
            "partials/_chat_list_page.html",
            sidebar=page,
            query=query,
            current_id=current,
            tag=tag,
            running_ids=running_ids(page),
            group_before=(request.args.get("group") or "")[:40],
        )
    return redirect(url_for("pages.index"))


@bp.get("/chats/running")
def running_chats():
    """Which of the listed chats (`ids`, comma-separated, the sidebar's page) are answering:
    the sidebar polls this to mark chats whose turn runs in the background."""
    ids = [i for i in (request.args.get("ids") or "").split(",") if i][:500]
    owned = chats.owned_chat_ids(g.user.id, ids)
    running = turn_manager().running_among(owned)
    return jsonify(running=sorted(running))


_CHAT_ID_MARK = "chat-id-mark"
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")


@bp.app_template_global("chat_item_urls")
def chat_item_urls(chat_id: str, current_id: str | None) -> dict[str, str]:
    """The four links of a sidebar item. A page lists fifty items, and `url_for` for each
    link was a quarter of `GET /`: the URLs are built once per request with a mark for the
    chat id, which each item fills in (an id that would need quoting is built in full)."""
    if not _PLAIN_ID.fullmatch(chat_id):
        return _item_urls(chat_id, current_id)
    cache = g.setdefault("chat_item_urls", {})
    shapes = cache.get(current_id)
    if shapes is None:
        shapes = cache[current_id] = _item_urls(_CHAT_ID_MARK, current_id)
    # The path comes first, so the first mark is the chat id's (`current` may hold anything).
    return {name: url.replace(_CHAT_ID_MARK, chat_id, 1) for name, url in shapes.items()}


def _item_urls(chat_id: str, current_id: str | None) -> dict[str, str]:
    return {
        "view": url_for("pages.chat_view", chat_id=chat_id),
        "organise": url_for("organising.organise", chat_id=chat_id, current=current_id),
        "rename": url_for("pages.rename_form", chat_id=chat_id, current=current_id),
        "delete": url_for("pages.delete", chat_id=chat_id, current=current_id),
    }


@bp.app_template_global("chat_group")
def chat_group(chat) -> str:
    """The sidebar's date group of a chat, in the browser's time zone (the `numi_tz` cookie,
    minutes east of UTC, set by sidebar.js; UTC until it is known)."""
    try:
        offset = max(-16 * 60, min(16 * 60, int(request.cookies.get("numi_tz", "0"))))
    except ValueError:
        offset = 0
    shift = timedelta(minutes=offset)
    return chats.date_group(chat.updated_at + shift, utcnow() + shift)
