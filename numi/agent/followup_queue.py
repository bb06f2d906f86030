"""The follow-up queue: sends that wait behind a running turn, and the next one started
when a turn ends.

`enqueue()` puts a send in the chat's queue (numi.chat.followups keeps it) and
`publish_queue()` tells every client of the chat what waits. `queue_after_turn()` is the
manager's turn-end hook: it runs in the process that ran the turn, with no request, and
`start_next()` starts the chat's first waiting send through the same checks as any send
(numi.agent.starting). Nothing here reads Flask's request globals.
"""

from __future__ import annotations

import time
import uuid

import gevent
from flask import current_app

from ..chat import followups
from ..errors import NumiError
from ..extensions import db, turn_manager
from ..models import QueuedMessage, User
from ..services import services
from ..turns.turn import Turn
from .send import Send
from .starting import begin_turn, check_send

# How often the turn-end hook looks whether the ended turn's Redis lease is released.
LEASE_RELEASE_INTERVAL = 0.02


def enqueue(user_id: int, chat_id: str, send: Send, attachments: list[int]) -> QueuedMessage:
    """Queue `send` (its attachments checked) behind the chat's running turn and tell the
    chat's clients. The same request_id again is the same item."""
    item = followups.add(
        user_id,
        chat_id,
        message=send.message,
        attachments=attachments,
        request_id=send.request_id or f"q-{uuid.uuid4().hex}",
        timezone=send.timezone,
        tz_offset=send.tz_offset,
        exempt=list(send.exempt),
    )
    publish_queue(chat_id, user_id)
    return item


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
    with services().queue_lock:
        if manager.is_running(chat_id):
            return False
        taken = followups.take_next(chat_id)
        if taken is None:
            return False
        user = db.session.get(User, taken["user_id"])
        if user is None:  # its account was deleted while the follow-up waited
            db.session.commit()
            return False
        payload = {key: taken[key] for key in ("message", "attachments", "request_id", "timezone")}
        payload["tz_offset"] = taken["tz_offset"]
        if taken["exempt"]:
            payload["exempt"] = taken["exempt"]  # this follow-up's own "Send as is once"
        try:
            # Checked again, as any send: the text was edited, an attachment may be gone.
            send = Send.from_payload(payload, current_app.config)
            begin_turn(
                check_send(user.id, chat_id, send),
                is_admin=bool(user.is_admin),
                client={"via": "queue"},
            )
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
            # which may come after this hook starts: wait for that, or the next follow-up
            # would find the chat still "running" and never start. Up to one lease period,
            # after which the lease has lapsed anyway; a fixed 2 s ran out on a loaded
            # machine, and the queue stood still (issue 36).
            manager = turn_manager()
            deadline = time.monotonic() + current_app.config["NUMI_TURN_LEASE_MS"] / 1000
            while manager.is_running(chat_id) and time.monotonic() < deadline:
                gevent.sleep(LEASE_RELEASE_INTERVAL)
            start_next(chat_id)
        elif followups.list_items(turn.request.user_id, chat_id):
            publish_queue(chat_id, turn.request.user_id, paused=True)
    finally:
        db.session.remove()
