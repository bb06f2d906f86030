"""Sending a message: the one way a turn starts, and the follow-up queue that starts the
next turn when one ends.

`start_turn()` serves every send (WebSocket `send`, POST /api/chat_stream, the page's
Retry, a queued follow-up): it validates the payload, checks the chat's owner and that no
turn runs, and hands a `TurnRequest` to the TurnManager, or queues the message behind the
running turn. `queue_after_turn()` is the manager's turn-end hook: it runs in the process
that ran the turn, with no request, and starts the chat's next queued follow-up. The web
layer calls these; nothing here reads Flask's request globals. It sits in the agent layer
because it joins the two below it: the chat's store (chats, follow-ups, attachments) and
the turn layer (TurnRequest, the manager), which do not import each other.
"""

from __future__ import annotations

import uuid
from typing import Any

import gevent
from flask import current_app
from gevent.lock import Semaphore
from sqlalchemy import select

from ..chat import chats, followups
from ..chat.attachments import owned_attachments
from ..errors import NumiError, invalid
from ..extensions import db, turn_manager
from ..models import Message, User
from ..turns.turn import Turn, TurnRequest
from .lanes import MAX_LANES, check_compare, refuse_compare


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
    queue = flag(payload.get("queue"), "queue")
    compare = check_compare(user_id, payload.get("compare"))
    if compare is not None:
        if saved:
            # A regenerate or a retry of a saved question answers it in one version.
            refuse_compare(payload, "a question that is saved already (a retry or a regenerate)")
        queue = False  # a compare starts now or is refused (turn_running): it never queues
    attachments = owned_attachments(user_id, payload.get("attachments"))
    timezone = payload.get("timezone")
    timezone = timezone if isinstance(timezone, str) and len(timezone) <= 64 else None
    offset = payload.get("tz_offset")
    try:
        offset = int(offset) if offset not in (None, "") else None
    except (TypeError, ValueError):
        offset = None
    if offset is not None and not -16 * 60 <= offset <= 16 * 60:
        offset = None
    manager = turn_manager()
    if queue and saved and manager.is_running(chat_id):
        db.session.commit()
        return None  # a resend of a question already saved (and being answered): nothing to do

    def enqueue():
        item = followups.add(
            user_id,
            chat_id,
            message=message,
            attachments=attachments,
            request_id=request_id or f"q-{uuid.uuid4().hex}",
            timezone=timezone,
            tz_offset=offset,
        )
        publish_queue(chat_id, user_id)
        return item

    if (
        queue
        and not saved
        and (manager.is_running(chat_id) or followups.list_items(user_id, chat_id))
    ):
        item = enqueue()
        if not manager.is_running(chat_id):
            start_next(
                chat_id
            )  # nothing runs (the queue was paused): the first waiting one goes now
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
        options={"compare": compare} if compare is not None else {},
    )
    try:
        return manager.start(turn_request)
    except NumiError as exc:
        # A turn this process could not see yet holds the chat (its owner took its lease
        # back after Redis lost its data): a send that may queue waits behind it.
        if exc.code != "turn_running" or not queue or saved:
            raise
        db.session.rollback()
        return enqueue()


def stop_turn(
    chat_id: str, user_id: int, *, clear_queue: Any = False, lane: Any = None
) -> tuple[bool, int]:
    """Stop the running turn; with clear_queue, drop what waits first (else the next one
    starts as this one ends); with `lane`, stop only that lane of a compare turn (the
    others go on). Returns (stopped, how many queued were dropped)."""
    if isinstance(lane, str) and lane.isdecimal() and len(lane) == 1:
        lane = int(lane)  # from a form
    if lane in ("", None):
        lane = None
    elif not isinstance(lane, int) or isinstance(lane, bool) or not 0 <= lane < MAX_LANES:
        raise invalid(f"lane must be a lane number, 0 to {MAX_LANES - 1}.", "invalid_lane")
    cleared = 0
    if flag(clear_queue, "clear_queue"):
        cleared = followups.clear(chat_id)
        publish_queue(chat_id, user_id)
    return turn_manager().stop(chat_id, lane), cleared


# --- queued follow-ups ----------------------------------------------------------------------


def publish_queue(chat_id: str, user_id: int, *, paused: bool | None = None) -> None:
    """Tell every client of the chat what waits now (`queue` event: the whole list)."""
    manager = turn_manager()
    items = [item.to_dict() for item in followups.list_items(user_id, chat_id)]
    db.session.commit()
    if paused is None:
        paused = bool(items) and not manager.is_running(chat_id)
    manager.channel(chat_id).publish(None, "queue", {"items": items, "paused": paused})


def start_next(chat_id: str) -> bool:
    """Start the chat's first queued follow-up unless a turn runs; True when one started.
    A follow-up that cannot start (its attachment deleted, no model) is dropped with an
    error event, and the queue pauses."""
    manager = turn_manager()
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
            manager.channel(chat_id).publish(
                None,
                "error",
                {"code": exc.code, "message": f"A queued message could not start: {exc.message}"},
            )
            publish_queue(chat_id, user.id, paused=True)
            return False
        publish_queue(chat_id, user.id, paused=False)
        return True


def queue_after_turn(turn: Turn) -> None:
    """The manager's turn-end hook: the next follow-up starts when a turn ends, unless the
    turn failed. After an error the queue pauses (what waits was probably written for the
    answer that failed; the user resumes it, and the error is on screen). A stopped turn
    goes on with the queue: Stop ends this answer; "Stop and clear" ends the queue too."""
    chat_id = turn.request.chat_id
    state = turn.channel.state
    # A turn stopped by the server's shutdown counts as failed: the queue waits for the user.
    failed = turn.cancel_reason == "shutdown" or (
        not turn.cancelled
        and state is not None
        and state.turn_id == turn.id
        and state.error is not None
        and state.error.get("code") != "cancelled"
    )
    try:
        if not failed:
            # With Redis the lease is released when the writer greenlet stores `turn_end`,
            # which may come just after this hook starts: wait for that (bounded), or the
            # next follow-up would find the chat still "running" and never start.
            manager = turn_manager()
            for _ in range(100):
                if not manager.is_running(chat_id):
                    break
                gevent.sleep(0.02)
            start_next(chat_id)
        elif followups.list_items(turn.request.user_id, chat_id):
            publish_queue(chat_id, turn.request.user_id, paused=True)
    finally:
        db.session.remove()


def flag(value: Any, name: str) -> bool:
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
    saved = db.session.execute(
        select(Message.content).where(Message.chat_id == chat_id, Message.request_id == request_id)
    ).first()
    if saved is not None and (saved.content or "").strip() != message.strip():
        raise NumiError(
            "request_id_reused",
            "This request_id was used for another message; send a new request_id.",
            409,
        )
    return saved is not None
