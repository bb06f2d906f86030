"""The chat list (sidebar pages, the running chats) and the template globals its items use."""

from __future__ import annotations

import re
from datetime import timedelta

from flask import current_app, g, jsonify, redirect, render_template, request, url_for

from ...chat import chats, organising
from ...extensions import turn_manager
from ...models import utcnow
from ..request_kind import is_htmx
from ..sidebar import sidebar_context
from .base import bp, running_ids


# An open chat far down the list is shown with this many chats above and below it; the
# chats between the first page and them load when the list is scrolled there.
AROUND_OPEN_CHAT = 10


@bp.get("/chats")
def chat_list():
    config = current_app.config
    query = (request.args.get("q") or "")[: config["NUMI_MAX_TITLE_CHARS"]]
    tag = (request.args.get("tag") or "")[: organising.MAX_TAG_CHARS]
    until = request.args.get("until") or None  # a gap above an open chat's neighbourhood
    page = chats.list_chats(
        g.user.id,
        limit=config["NUMI_PAGE_SIZE_CHATS"],
        cursor=request.args.get("cursor") or None,
        query=query,
        tag=tag,
        until=until,
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
            until=until,
            group_after=(request.args.get("after") or "")[:40],
            **sidebar_context(),
        )
    return redirect(url_for("pages.index"))


def open_chat_sidebar(chat) -> dict:
    """The sidebar of an open chat's page: the first page of the list and, when the chat is
    further down (not pinned, archived or in a project, which are listed elsewhere), its
    neighbourhood, `sidebar_around`, with the gap between them loaded lazily: a chat at
    the 500th place renders some 70 rows, not 500."""
    size = current_app.config["NUMI_PAGE_SIZE_CHATS"]
    sidebar = chats.list_chats(g.user.id, limit=size)
    listed = chat.pinned_at is None and chat.archived_at is None and chat.project_id is None
    above = chats.chats_listed_before(g.user.id, chat) if listed else 0
    if above < size:
        return {"sidebar": sidebar, "running_ids": running_ids(sidebar)}
    gap = above - size
    before = chats.chats_just_above(g.user.id, chat, min(AROUND_OPEN_CHAT, gap))
    after = chats.list_chats(g.user.id, limit=AROUND_OPEN_CHAT, cursor=chats.cursor_of(chat))
    around = chats.Page([*before, chat, *after.items], after.next_cursor)
    first_group = chat_group(around.items[0])
    shown = chats.Page(sidebar.items + around.items, None, sidebar.pinned)
    context = {"sidebar_around": around, "running_ids": running_ids(shown)}
    if gap > len(before):  # chats between the first page and the neighbourhood
        return context | {
            "sidebar": sidebar,
            "until": chats.cursor_of(around.items[0]),
            "group_after": first_group,
        }
    # Nothing between: the first page ends where the neighbourhood begins.
    last_group = chat_group(sidebar.items[-1]) if sidebar.items else "Pinned"
    return context | {
        "sidebar": chats.Page(sidebar.items, None, sidebar.pinned),
        "around_group_before": last_group,
    }


@bp.get("/chats/running")
def running_chats():
    """Which of the listed chats (`ids`, comma-separated) are answering, for programs (the
    sidebar is told of changes on its feed: web.live.sidebar_feed)."""
    ids = [i for i in (request.args.get("ids") or "").split(",") if i][:500]
    owned = chats.owned_chat_ids(g.user.id, ids)
    running = turn_manager().running_among(owned)
    return jsonify(running=sorted(running))


_CHAT_ID_MARK = "chat-id-mark"
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")


@bp.app_template_global("chat_item_urls")
def chat_item_urls(chat_id: str, current_id: str | None) -> dict[str, str]:
    """The links of a sidebar item. A page lists fifty items, and `url_for` for each
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
        "menu": url_for("pages.chat_menu", chat_id=chat_id, current=current_id),
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
