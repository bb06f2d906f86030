"""Starting turns, and the Server-Sent Events view of them for programs.

`start_turn()` is the one way a turn starts (WebSocket `send`, POST /api/chat_stream, the
page's Retry): it validates the payload, checks the chat's owner and that no turn runs,
and hands a `TurnRequest` to the TurnManager.

SSE routes (the second seed's detached stream control):
    POST /api/chat_stream               start a turn, stream its events until turn_end
    GET  /api/chat/resume/<chat_id>     replay missed events (Last-Event-ID), then follow
    POST /api/chat/stop/<chat_id>       cancel the running turn
    GET  /api/chat/stream_status/<id>   whether a turn runs, its id, the last event id
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context

from ..chat import chats
from ..errors import NumiError, invalid
from ..extensions import db
from ..turns.manager import TurnRequest
from .inputs import decode_json, event_id_value, request_data

bp = Blueprint("streams", __name__, url_prefix="/api")

CLIENT_TYPES = ("send", "stop", "resume", "approve")
SSE_KEEPALIVE_SECONDS = 15


def parse_client_message(raw: Any, config) -> dict[str, Any]:
    """A WebSocket client message, checked. Raises NumiError with a stable code."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) or len(raw) > config["NUMI_MAX_MESSAGE_CHARS"] * 2 + 65536:
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
        message["turn_id"] = turn_id if isinstance(turn_id, str) and turn_id.isalnum() and len(turn_id) <= 32 else None
    if kind == "approve":
        if not isinstance(message.get("call_id"), str) or message.get("decision") not in ("approve", "deny"):
            raise invalid("approve needs a call_id and a decision of approve or deny.")
        if message.get("digest") is not None and not isinstance(message["digest"], str):
            raise invalid("digest must be the text the approval card carries.")
    return message


def start_turn(user_id: int, is_admin: bool, chat_id: str, payload: dict[str, Any], config) -> Any:
    """Validate a send and start its turn; nothing is saved when validation fails."""
    chats.get_chat(user_id, chat_id)
    message = payload.get("message")
    if not isinstance(message, str) or not message.strip():
        raise invalid("Write a message first.", "empty_message")
    if len(message) > config["NUMI_MAX_MESSAGE_CHARS"]:
        raise invalid(f"The message is too long (at most {config['NUMI_MAX_MESSAGE_CHARS']} characters).", "too_long")
    request_id = payload.get("request_id")
    if request_id in ("", None):
        request_id = None
    elif not isinstance(request_id, str) or len(request_id) > 100:
        raise invalid("request_id must be text of at most 100 characters.")
    if request_id is not None:
        _check_request_reuse(chat_id, request_id, message)
    attachments = _attachment_ids(user_id, payload.get("attachments"))
    timezone = payload.get("timezone")
    timezone = timezone if isinstance(timezone, str) and len(timezone) <= 64 else None
    offset = payload.get("tz_offset")
    try:
        offset = int(offset) if offset not in (None, "") else None
    except (TypeError, ValueError):
        offset = None
    if offset is not None and not -16 * 60 <= offset <= 16 * 60:
        offset = None
    db.session.commit()  # end the read transaction before the producer starts writing
    turn_request = TurnRequest(
        user_id=user_id,
        chat_id=chat_id,
        message=message,
        attachments=attachments,
        request_id=request_id,
        timezone=timezone,
        tz_offset_minutes=offset,
        is_admin=is_admin,
    )
    return current_app.extensions["numi.turns"].start(turn_request)


def _check_request_reuse(chat_id: str, request_id: str, message: str) -> None:
    """A resent request_id is a retry of the same question; with other text it is a
    client bug that would silently get the old answer, so it is refused."""
    from sqlalchemy import select

    from ..models import Message

    saved = db.session.execute(
        select(Message.content).where(Message.chat_id == chat_id, Message.request_id == request_id)
    ).first()
    if saved is not None and (saved.content or "").strip() != message.strip():
        raise NumiError("request_id_reused",
                        "This request_id was used for another message; send a new request_id.", 409)


def _attachment_ids(user_id: int, value: Any) -> list[int]:
    """Attachment ids the user owns; a missing or foreign id fails before anything is saved."""
    from ..chat.attachments import owned_attachments

    return owned_attachments(user_id, value)


def request_timezone(payload: dict[str, Any]) -> dict[str, Any]:
    """The user's time zone from the IANA timezone header or X-Tz-Offset, unless given."""
    payload = dict(payload)
    payload.setdefault("timezone", request.headers.get("X-Timezone") or request.headers.get("Timezone"))
    payload.setdefault("tz_offset", request.headers.get("X-Tz-Offset"))
    return payload


# --- SSE ----------------------------------------------------------------------------------


def _sse(event: dict[str, Any]) -> str:
    event_id = "" if event.get("event_id") is None else f"id: {event['event_id']}\n"
    return f"{event_id}event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"


def _follow(chat_id: str, last_event_id: int | None, *, until_turn_end: bool = True):
    """Yield SSE frames: the backlog after `last_event_id`, then live events to turn_end."""
    manager = current_app.extensions["numi.turns"]
    subscription, backlog = manager.subscribe(chat_id, last_event_id)

    def generate():
        try:
            yield ": numi\n\n"  # first bytes now, so proxies and clients see the stream open
            for event in backlog:
                yield _sse(event)
                if until_turn_end and (event["type"] == "turn_end" or (
                        event["type"] == "snapshot" and event["data"].get("finished"))):
                    return  # a finished turn has nothing more to send
            while True:
                event = subscription.get(timeout=SSE_KEEPALIVE_SECONDS)
                if event is None:
                    if subscription.closed:
                        return
                    yield ": keep-alive\n\n"
                    continue
                yield _sse(event)
                if until_turn_end and event["type"] == "turn_end":
                    return
        finally:
            subscription.close()

    return Response(stream_with_context(generate()), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@bp.post("/chat_stream")
def chat_stream():
    data = request_timezone(request_data())
    chat_id = data.get("session") or data.get("chat_id")
    if not isinstance(chat_id, str):
        raise invalid("Name the chat: session (its id).", "missing_session")
    chat = chats.get_chat(g.user.id, chat_id)
    fields = _route_fields(data)
    fields.update(_tool_fields(chat, data))
    if fields:
        if current_app.extensions["numi.turns"].is_running(chat.id):
            raise NumiError("turn_running", "A turn is already running in this chat.", 409)
        chats.update_chat(g.user.id, chat.id, fields, current_app.config)
    manager = current_app.extensions["numi.turns"]
    last_event_id = manager.channel(chat.id).last_event_id
    start_turn(g.user.id, g.user.is_admin, chat.id, data, current_app.config)
    return _follow(chat.id, last_event_id)


def _route_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The seed's selected_endpoint_id and model as chat fields. An endpoint that is gone
    (deleted, or never the user's) is repaired like a chat's saved one: the turn runs on
    the chat's route, or the default one, instead of failing with a 404."""
    from .. import endpoints as endpoint_store
    from ..errors import NotFound

    fields: dict[str, Any] = {}
    selected = data.get("selected_endpoint_id")
    if selected not in (None, ""):
        if isinstance(selected, bool) or not isinstance(selected, int | str) or not str(selected).isdecimal() \
                or len(str(selected)) > 18:
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
    manager = current_app.extensions["numi.turns"]
    last_event_id = event_id_value(request.headers.get("Last-Event-ID") or request.args.get("last_event_id"))
    status = manager.status(chat_id)
    channel = manager.channels.get(chat_id)
    if not status["running"] and (channel is None or channel.state is None
                                  or (last_event_id or 0) >= channel.last_event_id):
        return Response(status=204)  # nothing to resume: the database has it all
    db.session.commit()
    return _follow(chat_id, last_event_id)


@bp.post("/chat/stop/<chat_id>")
def stop(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    stopped = current_app.extensions["numi.turns"].stop(chat_id)
    return jsonify(stopped=stopped)


@bp.get("/chat/stream_status/<chat_id>")
def stream_status(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    return jsonify(current_app.extensions["numi.turns"].status(chat_id))
