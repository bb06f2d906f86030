"""Transcript routes: edit, regenerate, delete, fork, the topic outline, and search.

HTML (HTMX) and JSON routes share the domain functions of `numi.chat.edits` and
`numi.chat.search`. After an edit or a regenerate the HTMX response is the refreshed
transcript (swapped into #transcript) and the turn starts only once that response has been
sent: the turn's first event appends its live container to #transcript over the
WebSocket, and starting earlier could let the swap wipe that container out.

    GET  /c/<chat>/messages/<id>            one message (cancel an edit)
    GET  /c/<chat>/messages/<id>/edit       the inline edit form of a question
    GET  /c/<chat>/messages/<id>/markdown   an answer shown plain past the cap, as markdown
    POST /c/<chat>/messages/<id>/edit       save the edit, regenerate from there
    POST /c/<chat>/regenerate               answer the last question again (route optional)
    POST /c/<chat>/retry                    answer it again after a failure (message_id)
    POST /c/<chat>/messages/<id>/delete     delete a message (scope=message) or its turn
    POST /c/<chat>/messages/restore         undo a delete (its toast's Undo)
    POST /c/<chat>/messages/<id>/fork       new chat with the transcript up to the message
    POST /c/<chat>/messages/<id>/show       show this version instead of its siblings
    GET  /c/<chat>/topics                   outline of the chat's turns
    GET  /search?q=&mode=titles|messages    the sidebar's search results
and the JSON twins under /api/session/<chat>/... and GET /api/search.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for

from ..agent.lanes import refuse_compare
from ..agent.send import Send
from ..agent.sending import Started, start_turn
from ..chat import chats, edits
from ..chat import search as chat_search
from ..chat.attachments import transcript_attachments
from ..chat.versions import version_info
from ..errors import NumiError, invalid
from ..extensions import turn_manager
from ..models import Message
from .inputs import int_arg, request_data
from .markdown_on_request import render_on_request
from .pages.chat import transcript_context
from .pages.chat_forms import route_fields
from .request_kind import is_htmx, request_timezone
from .sidebar import sidebar_context

log = logging.getLogger(__name__)

bp = Blueprint("transcript", __name__)


def _attachment_field(data: dict[str, Any]) -> Any:
    """Attachment ids from JSON (a list) or a form (repeated `attachments` fields)."""
    if request.mimetype == "application/json":
        return data.get("attachments")
    return [v for v in request.form.getlist("attachments") if v != ""]


def _route_fields(data: dict[str, Any]) -> dict[str, Any] | None:
    if data.get("route"):
        return route_fields(data["route"])
    fields = {k: data[k] for k in ("endpoint_id", "model") if data.get(k) not in (None, "")}
    return fields or None


def refreshed_transcript(
    chat_id: str,
    *,
    start: Send | None = None,
    focus_version: tuple[int, str] | None = None,
):
    """The HTMX answer after a change: the transcript again; then start the turn of
    `start`, if any.
    `focus_version` (message id, "previous"|"next") puts the focus back on the switcher used."""
    chat = chats.get_chat(g.user.id, chat_id)
    limit = current_app.config["NUMI_PAGE_SIZE_MESSAGES"]
    has_newer = False
    if focus_version is not None:
        # Open on the switched message, wherever it is in a long chat.
        page, has_newer = chats.list_messages_around(chat, focus_version[0], limit=limit)
    else:
        page = chats.list_messages(chat, limit=limit)
    response = current_app.make_response(
        render_template(
            "partials/_edit_transcript.html",
            chat=chat,
            focus_version=focus_version,
            has_newer=has_newer,
            **transcript_context(page, newest=not has_newer),
        )
    )
    if start is not None:
        app = current_app._get_current_object()
        user_id, is_admin = g.user.id, g.user.is_admin

        def start_after_response():
            with app.app_context():
                try:
                    start_turn(user_id, is_admin, chat_id, start)
                except NumiError as exc:
                    log.warning("regeneration of chat %s did not start: %s", chat_id, exc.code)

        response.call_on_close(start_after_response)
    return response


def _after_change(chat_id: str, send: Send | None, status: int = 202, **body):
    """Finish an edit/regenerate/delete for whichever client asked."""
    if is_htmx():
        return refreshed_transcript(chat_id, start=send)
    turn_id = None
    if send is not None:
        started = start_turn(g.user.id, g.user.is_admin, chat_id, send)
        turn_id = started.turn.id if isinstance(started, Started) else None
    if request.path.startswith("/api/"):
        return jsonify(turn_id=turn_id, **body), status
    return redirect(url_for("pages.chat_view", chat_id=chat_id), code=303)


def _answer_again(question: Message) -> Send:
    """The send that answers the saved `question` again, in the client's time zone."""
    payload = request_timezone(edits.regeneration_payload(question))
    return Send.from_payload(payload, current_app.config)


# --- edit ---------------------------------------------------------------------------------


@bp.get("/c/<chat_id>/messages/<int:message_id>")
def message_view(chat_id: str, message_id: int):
    chat = chats.get_chat(g.user.id, chat_id)
    message = edits.get_message(chat, message_id)
    return render_template(
        "partials/_message.html",
        message=message,
        chat=chat,
        versions=version_info(chat.id, [message]),
        attachments=transcript_attachments(chat.id, [message]),
    )


@bp.get("/c/<chat_id>/messages/<int:message_id>/markdown")
def message_markdown(chat_id: str, message_id: int):
    """An answer shown as plain text past NUMI_MARKDOWN_MAX_CHARS, rendered as markdown on
    its owner's request: bounded in size, one at a time per user, in the CPU pool (see
    numi.web.markdown_on_request)."""
    chat = chats.get_chat(g.user.id, chat_id)
    message = edits.get_message(chat, message_id)
    if message.role == "user" or not message.content:
        raise invalid("Only an answer is rendered as markdown.", "not_markdown")
    return render_template(
        "partials/_message_markdown.html",
        message=message,
        html=render_on_request(message, g.user.id),
    )


@bp.get("/c/<chat_id>/messages/<int:message_id>/edit")
def edit_form(chat_id: str, message_id: int):
    chat = chats.get_chat(g.user.id, chat_id)
    message = edits.get_message(chat, message_id)
    if message.role != "user":
        raise invalid(
            "Only your own messages can be edited; regenerate an answer instead.", "not_editable"
        )
    return render_template(
        "partials/_edit_form.html",
        message=message,
        chat=chat,
        attachments=transcript_attachments(chat.id, [message]),
    )


@bp.post("/c/<chat_id>/messages/<int:message_id>/edit")
@bp.post("/api/session/<chat_id>/messages/<int:message_id>/edit", endpoint="api_edit")
def edit(chat_id: str, message_id: int):
    data = request_data()
    refuse_compare(data, "an edit")
    text = data.get("text", data.get("message"))
    message = edits.edit_message(
        g.user.id, chat_id, message_id, text, _attachment_field(data), current_app.config
    )
    return _after_change(chat_id, _answer_again(message), message=message.to_dict())


# --- regenerate ---------------------------------------------------------------------------


@bp.post("/c/<chat_id>/regenerate")
@bp.post("/api/session/<chat_id>/regenerate", endpoint="api_regenerate")
def regenerate(chat_id: str):
    data = request_data()
    refuse_compare(data, "a regenerate")
    question = edits.prepare_regenerate(g.user.id, chat_id, _route_fields(data), current_app.config)
    return _after_change(chat_id, _answer_again(question), message=question.to_dict())


@bp.post("/c/<chat_id>/retry")
@bp.post("/api/session/<chat_id>/retry", endpoint="api_retry")
def retry(chat_id: str):
    """Answer the newest question again after its turn failed: the HTMX answer is the
    transcript without the failed answer (kept as the previous version), then the turn."""
    data = request_data()
    after_id = data.get("message_id")
    if isinstance(after_id, str) and after_id.isdigit():
        after_id = int(after_id)
    question = edits.prepare_retry(g.user.id, chat_id, after_id)
    return _after_change(chat_id, _answer_again(question), message=question.to_dict())


# --- delete and fork ----------------------------------------------------------------------


@bp.post("/c/<chat_id>/messages/<int:message_id>/delete")
@bp.delete("/api/session/<chat_id>/messages/<int:message_id>", endpoint="api_delete_message")
def delete_message(chat_id: str, message_id: int):
    data = request_data()
    scope = request.args.get("scope") or data.get("scope") or "message"
    removed = edits.delete_messages(g.user.id, chat_id, message_id, scope)
    response = _after_change(chat_id, None, status=200, deleted=removed)
    if is_htmx():  # the page's delete asks nothing first: a toast offers Undo instead
        toast = render_template(
            "partials/_message_undo_toast.html",
            chat_id=chat_id,
            ids=removed,
            toast_id=f"toast-{uuid.uuid4().hex[:12]}",
        )
        response.set_data(response.get_data() + toast.encode())
    return response


@bp.post("/c/<chat_id>/messages/restore")
def restore_messages(chat_id: str):
    """The Undo of a message delete (its toast): the messages are back in the transcript."""
    ids = [int(i) for i in request.form.getlist("ids") if i.isdecimal()]
    edits.restore_messages(g.user.id, chat_id, ids)
    if is_htmx():
        response = refreshed_transcript(chat_id)
        gone = render_template("partials/_toast_gone.html", toast_id=request.form.get("toast"))
        response.set_data(response.get_data() + gone.encode())
        return response
    return redirect(url_for("pages.chat_view", chat_id=chat_id), code=303)


@bp.post("/c/<chat_id>/messages/<int:message_id>/fork")
@bp.post("/api/session/<chat_id>/messages/<int:message_id>/fork", endpoint="api_fork")
def fork(chat_id: str, message_id: int):
    forked = edits.fork_chat(g.user.id, chat_id, message_id)
    if request.path.startswith("/api/"):
        return jsonify(forked.to_dict()), 201
    target = url_for("pages.chat_view", chat_id=forked.id)
    if is_htmx():
        return "", 204, {"HX-Location": target}
    return redirect(target, code=303)


@bp.post("/c/<chat_id>/messages/<int:message_id>/show")
@bp.post("/api/session/<chat_id>/messages/<int:message_id>/show", endpoint="api_show_version")
def show_version(chat_id: str, message_id: int):
    message = edits.switch_version(g.user.id, chat_id, message_id)
    if is_htmx():
        direction = (
            request.form.get("direction")
            if request.form.get("direction") in ("previous", "next")
            else "next"
        )
        return refreshed_transcript(chat_id, focus_version=(message.id, direction))
    if request.path.startswith("/api/"):
        info = version_info(chat_id, [message]).get(message.id)
        return jsonify(message_id=message.id, version=info.to_dict() if info else None)
    return redirect(
        url_for("pages.chat_view", chat_id=chat_id, _anchor=f"msg-{message.id}"), code=303
    )


# --- outline ------------------------------------------------------------------------------


@bp.get("/c/<chat_id>/topics")
def topics(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    items = edits.topics(g.user.id, chat_id)
    if is_htmx():
        return render_template("partials/_topic_list.html", chat=chat, topics=items)
    return render_template("topics.html", chat=chat, topics=items)


@bp.get("/api/session/<chat_id>/topics")
def topics_json(chat_id: str):
    return jsonify(topics=[t.to_dict() for t in edits.topics(g.user.id, chat_id)])


# --- search -------------------------------------------------------------------------------


@bp.get("/search")
def search():
    config = current_app.config
    query = (request.args.get("q") or "")[: chat_search.MAX_QUERY_CHARS]
    current = request.args.get("current") or ""
    if request.args.get("mode") != "messages" or not query.strip():
        # Title mode is the chat list filtered by title, the same list /chats gives.
        tag = (request.args.get("tag") or "")[:40]
        page = chats.list_chats(
            g.user.id,
            limit=config["NUMI_PAGE_SIZE_CHATS"],
            query=query,
            tag=tag,
            project_id=_project_arg(),
        )
        template = "partials/_chat_list_page.html"
        if is_htmx():
            running = turn_manager().running_among([c.id for c in page.pinned + page.items])
            return render_template(
                template,
                sidebar=page,
                query=query,
                current_id=current,
                tag=tag,
                running_ids=running,
                **sidebar_context(),
            )
        return render_template(
            "search.html",
            results=None,
            query=query,
            sidebar=page,
            current_id=current,
            **sidebar_context(),
        )
    results = chat_search.search(
        g.user.id, query, limit=config["NUMI_PAGE_SIZE_CHATS"], project_id=_project_arg()
    )
    if is_htmx():
        return render_template("partials/_search_results.html", results=results, current_id=current)
    return render_template("search.html", results=results, query=query, current_id=current)


def _project_arg() -> int | None:
    """`?project=<id>` (or `project_id`): search one of the user's projects only."""
    raw = request.args.get("project") or request.args.get("project_id") or ""
    if not raw:
        return None
    return chats.project_ref(g.user.id, int(raw) if raw.isdigit() else -1)


@bp.get("/api/search")
def search_json():
    results = chat_search.search(
        g.user.id,
        request.args.get("q") or "",
        limit=int_arg("limit", 20, low=1, high=100),
        project_id=_project_arg(),
    )
    return jsonify(
        query=results.query,
        engine=results.engine,
        chats=[{"id": c.id, "title": c.title} for c in results.chats],
        messages=[m.to_dict() for m in results.messages],
    )
