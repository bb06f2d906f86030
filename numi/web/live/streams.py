"""The request side of turns: client messages checked, and the Server-Sent Events view
of turns for programs.

Starting a turn and the follow-up queue are the chat layer's (`numi.agent.sending`): they
also run with no request, as the turn-end hook. Here are the checks of what a client sends
(`parse_client_message`) and the SSE routes.

SSE routes (the second seed's detached stream control):
    POST /api/chat_stream               start a turn, stream its events until turn_end
    GET  /api/chat/resume/<chat_id>     replay missed events (Last-Event-ID), then follow
    POST /api/chat/stop/<chat_id>       cancel the running turn
    GET  /api/chat/stream_status/<id>   whether a turn runs, its id, the last event id
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context

from ... import endpoints as endpoint_store
from ...agent.send import Send
from ...agent.sending import AlreadySaved, Queued, Started, start_turn, stop_turn
from ...setting_values import parse_bool
from ...chat import chats
from ...errors import NotFound, NumiError, invalid, turn_running
from ...extensions import db, turn_manager
from ...turns.channel import encoded
from ..inputs import decode_json, event_id_value, request_data
from ..request_kind import request_client, request_timezone

bp = Blueprint("streams", __name__, url_prefix="/api")

CLIENT_TYPES = ("send", "stop", "resume", "approve")
SSE_KEEPALIVE_SECONDS = 15


def client_message_limit(config) -> int:
    """The longest WebSocket client message in characters: a send of the longest user
    message, JSON-escaped, with room for its other fields. The socket reader refuses a
    longer one as it arrives (close 1009, `SOCK_SERVER_OPTIONS["max_message_size"]`)."""
    return config["NUMI_MAX_MESSAGE_CHARS"] * 2 + 65536


def parse_client_message(raw: Any, config) -> dict[str, Any]:
    """A WebSocket client message, checked. Raises NumiError with a stable code."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) or len(raw) > client_message_limit(config):
        raise invalid("The message is too large.", "too_large")
    message = decode_json(raw, max_depth=config["NUMI_MAX_JSON_DEPTH"], subject="The message")
    if not isinstance(message, dict):
        raise invalid("The message must be a JSON object.", "invalid_json")
    kind = message.get("type")
    if kind not in CLIENT_TYPES:
        raise invalid("Unknown message type.", "unknown_type")
    if kind == "resume":
        for key in ("last_event_id", "last_message_id"):
            message[key] = event_id_value(message.get(key), key)
        turn_id = message.get("turn_id")
        message["turn_id"] = (
            turn_id
            if isinstance(turn_id, str) and turn_id.isalnum() and len(turn_id) <= 32
            else None
        )
    if kind == "approve":
        check_approval(message)
    return message


def check_approval(message: dict[str, Any]) -> None:
    """The fields of an approval (WebSocket `approve` or `POST /api/chat/approve`)."""
    if not isinstance(message.get("call_id"), str) or message.get("decision") not in (
        "approve",
        "deny",
    ):
        raise invalid("approve needs a call_id and a decision of approve or deny.")
    if message.get("digest") is not None and not isinstance(message["digest"], str):
        raise invalid("digest must be the text the approval card carries.")


# --- SSE ----------------------------------------------------------------------------------


def _sse(event: dict[str, Any]) -> str:
    event_id = "" if event.get("event_id") is None else f"id: {event['event_id']}\n"
    return f"{event_id}event: {event['type']}\ndata: {encoded(event)}\n\n"


# How long a stream that saw its turn end waits for the chat's new title (the title
# model's own deadline is 20 s; the first-words title comes at once).
TITLE_WAIT_SECONDS = 25


def _follow(chat_id: str, last_event_id: int | None, *, resume: bool = False):
    """Yield SSE frames: the backlog after `last_event_id`, then live events until the turn
    ends (and its `title_update`, when one is pending, has come). A resume that finds
    nothing running ends after what it replayed."""
    manager = turn_manager()
    subscription, backlog = manager.subscribe(chat_id, last_event_id)

    def generate():
        title_deadline = None  # while a finished turn's title is on its way

        def ends_after(event) -> bool:
            nonlocal title_deadline
            kind, data = event["type"], event.get("data") or {}
            if kind == "turn_end" and data.get("title_pending"):
                title_deadline = time.monotonic() + TITLE_WAIT_SECONDS
                return False
            if kind == "title_update" and title_deadline is not None:
                return True
            if kind == "turn_start" and title_deadline is not None:
                return True  # the next turn (a queued follow-up) is not this stream's
            return kind == "turn_end" or (kind == "snapshot" and data.get("finished"))

        try:
            yield ": numi\n\n"  # first bytes now, so proxies and clients see the stream open
            for event in backlog:
                yield _sse(event)
                if ends_after(event):
                    return  # a finished turn has nothing more to send
            if resume and title_deadline is None and not manager.is_running(chat_id):
                return  # replayed what there was; nothing runs to follow
            while True:
                wait = SSE_KEEPALIVE_SECONDS
                if title_deadline is not None:
                    wait = min(wait, title_deadline - time.monotonic())
                    if wait <= 0:
                        return
                event = subscription.get(timeout=wait)
                if event is None:
                    if subscription.closed:
                        return
                    if title_deadline is None or time.monotonic() < title_deadline:
                        yield ": keep-alive\n\n"
                    continue
                yield _sse(event)
                if ends_after(event):
                    return
        finally:
            subscription.close()

    return Response(
        stream_with_context(generate()),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@bp.post("/chat_stream")
def chat_stream():
    data = request_timezone(request_data())
    chat_id = data.get("session") or data.get("chat_id")
    if not isinstance(chat_id, str):
        raise invalid("Name the chat: session (its id).", "missing_session")
    chat = chats.get_chat(g.user.id, chat_id)
    # The whole send is checked before the seed's route and tool fields change the chat.
    send = Send.from_payload(data, current_app.config)
    fields = _route_fields(data)
    fields.update(_tool_fields(chat, data))
    manager = turn_manager()
    if fields:
        if manager.is_running(chat.id):
            raise turn_running()
        chats.update_chat(g.user.id, chat.id, fields, current_app.config)
    last_event_id = manager.last_event_id(chat.id)
    match start_turn(
        g.user.id, g.user.is_admin, chat.id, send, client=request_client("chat_stream")
    ):
        case Started():
            return _follow(chat.id, last_event_id)
        case Queued(item):
            # Nothing to stream for it now: its turn's events come on /api/chat/resume
            # once it starts.
            return jsonify(queued=item.to_dict()), 202
        case AlreadySaved():
            return jsonify(queued=None), 202


def _route_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The seed's selected_endpoint_id and model as chat fields. An endpoint that is gone
    (deleted, or never the user's) is repaired like a chat's saved one: the turn runs on
    the chat's route, or the default one, instead of failing with a 404."""
    fields: dict[str, Any] = {}
    selected = data.get("selected_endpoint_id")
    if selected not in (None, ""):
        if (
            isinstance(selected, bool)
            or not isinstance(selected, int | str)
            or not str(selected).isdecimal()
            or len(str(selected)) > 18
        ):
            raise invalid("selected_endpoint_id must be a number.")
        try:
            fields["endpoint_id"] = endpoint_store.get_endpoint(g.user.id, int(selected)).id
        except NotFound:
            return {}  # the model named with it belonged to the missing endpoint too
    if data.get("model"):
        fields["model"] = data["model"]
    return fields


WEB_TOOLS = ("web_search", "fetch_page")
WORKSPACE_TOOLS = ("list_files", "read_file", "search_files", "write_file", "patch_file")


def _tool_fields(chat, data: dict[str, Any]) -> dict[str, Any]:
    """The seed's allow_web_search / allow_bash / use_rag / workspace fields as chat
    settings: each turns its tools on or off in the chat (and stays so, like the chosen
    model)."""
    tools = list(chat.settings.get("tools") or [])
    before = list(tools)

    def switch(names: tuple[str, ...], on: Any) -> None:
        nonlocal tools
        if on is None:
            return
        if not isinstance(on, bool):
            raise invalid("allow_web_search, allow_bash and use_rag must be true or false.")
        tools = [t for t in tools if t not in names] + (list(names) if on else [])

    switch(WEB_TOOLS, data.get("allow_web_search"))
    switch(("bash",), data.get("allow_bash"))
    switch(("search_documents",), data.get("use_rag"))
    fields: dict[str, Any] = {}
    if "workspace" in data:
        fields["workspace"] = data["workspace"]
        switch(WORKSPACE_TOOLS, bool(data["workspace"]))
    if tools != before:
        fields["tools"] = tools
    return fields


@bp.get("/chat/resume/<chat_id>")
def resume(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    manager = turn_manager()
    last_event_id = event_id_value(
        request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    )
    status = manager.status(chat_id)
    if not status["running"] and (
        status["turn_id"] is None or (last_event_id or 0) >= status["last_event_id"]
    ):
        return Response(status=204)  # nothing to resume: the database has it all
    db.session.commit()
    return _follow(chat_id, last_event_id, resume=True)


@bp.post("/chat/stop/<chat_id>")
def stop(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    data = request_data()
    clear_queue = data.get("clear_queue", request.args.get("clear_queue"))
    stopped, cleared = stop_turn(
        chat_id, g.user.id, clear_queue=clear_queue, lane=data.get("lane"), write=data.get("write")
    )
    return jsonify(
        stopped=stopped, **({"cleared": cleared} if parse_bool(clear_queue, "clear_queue") else {})
    )


@bp.post("/chat/approve/<chat_id>")
def approve(chat_id: str):
    """Answer a tool call's approval, for clients that follow a turn by SSE: the same
    fields and digest rule as the WebSocket's `approve` message."""
    chats.get_chat(g.user.id, chat_id)
    data = request_data()
    check_approval(data)
    if not turn_manager().approve(chat_id, data["call_id"], data["decision"], data.get("digest")):
        raise NumiError("no_such_approval", "That tool call is not waiting for approval.", 409)
    return jsonify(approved=data["decision"] == "approve", call_id=data["call_id"])


@bp.get("/chat/stream_status/<chat_id>")
def stream_status(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    return jsonify(turn_manager().status_or_unknown(chat_id))
