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
import uuid
from typing import Any

import gevent
from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context
from gevent.lock import Semaphore

from ..chat import chats, followups
from ..errors import NumiError, invalid, turn_running
from ..extensions import db
from ..models import User
from ..turns.channel import encoded
from ..turns.turn import Turn, TurnRequest
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
    """Validate a send and start its turn; nothing is saved when validation fails.

    With `"queue": true` a send that finds a turn running (or follow-ups waiting before it)
    is queued instead: the QueuedMessage is returned, and it starts after the turns before
    it (None: a resend of a question saved already). Without it a running turn still
    refuses the send (`turn_running`)."""
    chats.get_chat(user_id, chat_id)
    message = followups.check_text(payload.get("message"), config["NUMI_MAX_MESSAGE_CHARS"])
    request_id = payload.get("request_id")
    if request_id in ("", None):
        request_id = None
    elif not isinstance(request_id, str) or len(request_id) > 100:
        raise invalid("request_id must be text of at most 100 characters.")
    saved = request_id is not None and _check_request_reuse(chat_id, request_id, message)
    queue = _flag(payload.get("queue"), "queue")
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
    manager = current_app.extensions["numi.turns"]
    if queue and saved and manager.is_running(chat_id):
        db.session.commit()
        return None  # a resend of a question already saved (and being answered): nothing to do
    if queue and not saved and (manager.is_running(chat_id) or followups.list_items(user_id, chat_id)):
        item = followups.add(user_id, chat_id, message=message, attachments=attachments,
                             request_id=request_id or f"q-{uuid.uuid4().hex}", timezone=timezone, tz_offset=offset)
        publish_queue(chat_id, user_id)
        if not manager.is_running(chat_id):
            start_next(chat_id)  # nothing runs (the queue was paused): the first waiting one goes now
        return item
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
    return manager.start(turn_request)


# --- queued follow-ups ----------------------------------------------------------------------

def publish_queue(chat_id: str, user_id: int, *, paused: bool | None = None) -> None:
    """Tell every client of the chat what waits now (`queue` event: the whole list)."""
    manager = current_app.extensions["numi.turns"]
    items = [item.to_dict() for item in followups.list_items(user_id, chat_id)]
    db.session.commit()
    if paused is None:
        paused = bool(items) and not manager.is_running(chat_id)
    manager.channel(chat_id).publish(None, "queue", {"items": items, "paused": paused})


def start_next(chat_id: str) -> bool:
    """Start the chat's first queued follow-up unless a turn runs; True when one started.
    A follow-up that cannot start (its attachment deleted, no model) is dropped with an
    error event, and the queue pauses."""
    manager = current_app.extensions["numi.turns"]
    # One per app, held while a follow-up is taken and started (a few queries): two turn
    # ends or a Resume racing a turn end must not take two items for one chat.
    lock = current_app.extensions.setdefault("numi.queue_lock", Semaphore())
    with lock:
        if manager.is_running(chat_id):
            return False
        taken = followups.take_next(chat_id)
        if taken is None:
            return False
        user = db.session.get(User, taken["user_id"])
        payload = {key: taken[key] for key in ("message", "attachments", "request_id", "timezone")}
        payload["tz_offset"] = taken["tz_offset"]
        try:
            start_turn(user.id, bool(user.is_admin), chat_id, payload, current_app.config)
        except NumiError as exc:
            db.session.rollback()
            if exc.code == "turn_running":  # a send without queue started first: wait for it
                followups.put_back(taken)
                return False
            manager.channel(chat_id).publish(None, "error", {
                "code": exc.code, "message": f"A queued message could not start: {exc.message}"})
            publish_queue(chat_id, user.id, paused=True)
            return False
        publish_queue(chat_id, user.id, paused=False)
        return True


def queue_after_turn(turn) -> None:
    """The manager's turn-end hook: the next follow-up starts when a turn ends, unless the
    turn failed. After an error the queue pauses (what waits was probably written for the
    answer that failed; the user resumes it, and the error is on screen). A stopped turn
    goes on with the queue: Stop ends this answer; "Stop and clear" ends the queue too."""
    chat_id = turn.request.chat_id
    state = turn.channel.state
    failed = (not turn.cancelled and state is not None and state.turn_id == turn.id
              and state.error is not None and state.error.get("code") != "cancelled")
    try:
        if not failed:
            # With Redis the lease is released when the writer greenlet stores `turn_end`,
            # which may come just after this hook starts: wait for that (bounded), or the
            # next follow-up would find the chat still "running" and never start.
            manager = current_app.extensions["numi.turns"]
            for _ in range(100):
                if not manager.is_running(chat_id):
                    break
                gevent.sleep(0.02)
            start_next(chat_id)
        elif followups.list_items(turn.request.user_id, chat_id):
            publish_queue(chat_id, turn.request.user_id, paused=True)
    finally:
        db.session.remove()


def _flag(value: Any, name: str) -> bool:
    """A true/false field from JSON (a boolean) or a form or WebSocket form ("true")."""
    if value in (None, False, "", "false", "0"):
        return False
    if value in (True, "true", "1"):
        return True
    raise invalid(f"{name} must be true or false.")


def _check_request_reuse(chat_id: str, request_id: str, message: str) -> bool:
    """A resent request_id is a retry of the same question; with other text it is a
    client bug that would silently get the old answer, so it is refused. True when the
    question is saved already."""
    from sqlalchemy import select

    from ..models import Message

    saved = db.session.execute(
        select(Message.content).where(Message.chat_id == chat_id, Message.request_id == request_id)
    ).first()
    if saved is not None and (saved.content or "").strip() != message.strip():
        raise NumiError("request_id_reused",
                        "This request_id was used for another message; send a new request_id.", 409)
    return saved is not None


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
    return f"{event_id}event: {event['type']}\ndata: {encoded(event)}\n\n"


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
            raise turn_running()
        chats.update_chat(g.user.id, chat.id, fields, current_app.config)
    manager = current_app.extensions["numi.turns"]
    last_event_id = manager.last_event_id(chat.id)
    started = start_turn(g.user.id, g.user.is_admin, chat.id, data, current_app.config)
    if not isinstance(started, Turn):
        # Queued (or a resend of a question already saved): nothing to stream for it now;
        # its turn's events come on /api/chat/resume once it starts.
        return jsonify(queued=started.to_dict() if started is not None else None), 202
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
    if not status["running"] and (status["turn_id"] is None or (last_event_id or 0) >= status["last_event_id"]):
        return Response(status=204)  # nothing to resume: the database has it all
    db.session.commit()
    return _follow(chat_id, last_event_id)


@bp.post("/chat/stop/<chat_id>")
def stop(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    clear_queue = request_data().get("clear_queue", request.args.get("clear_queue"))
    stopped, cleared = stop_turn(chat_id, g.user.id, clear_queue=clear_queue)
    return jsonify(stopped=stopped, **({"cleared": cleared} if _flag(clear_queue, "clear_queue") else {}))


def stop_turn(chat_id: str, user_id: int, *, clear_queue: Any = False) -> tuple[bool, int]:
    """Stop the running turn; with clear_queue, drop what waits first (else the next one
    starts as this one ends). Returns (stopped, how many queued were dropped)."""
    cleared = 0
    if _flag(clear_queue, "clear_queue"):
        cleared = followups.clear(chat_id)
        publish_queue(chat_id, user_id)
    return current_app.extensions["numi.turns"].stop(chat_id), cleared


@bp.get("/chat/stream_status/<chat_id>")
def stream_status(chat_id: str):
    chats.get_chat(g.user.id, chat_id)
    return jsonify(current_app.extensions["numi.turns"].status(chat_id))
