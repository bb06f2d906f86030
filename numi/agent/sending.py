"""Sending a message: the one way a client's question starts a turn, or waits for one.

`start_turn()` serves every send (WebSocket `send`, POST /api/chat_stream, the home page's
form, an edit, a regenerate or a Retry): it takes a `Send` checked at the edge
(numi.agent.send), checks it against the database and that no turn runs, and hands it to
the TurnManager (numi.agent.starting), or queues it behind the running turn
(numi.agent.followup_queue). What happened is a typed result the caller matches on:
`Started`, `Queued` or `AlreadySaved`. The web layer calls these; nothing here reads
Flask's request globals. It sits in the agent layer because it joins the two below it:
the chat's store (chats, follow-ups, attachments) and the turn layer (TurnRequest, the
manager), which do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..chat import followups
from ..errors import NumiError, invalid, turn_running
from ..extensions import db, turn_manager
from ..models import QueuedMessage
from ..setting_values import parse_bool
from ..turns.turn import Turn
from .followup_queue import enqueue, publish_queue, start_next
from .lanes import MAX_LANES
from .research_store import request_write
from .send import Send
from .starting import begin_turn, check_send


@dataclass(frozen=True)
class Started:
    """The send's turn runs."""

    turn: Turn


@dataclass(frozen=True)
class Queued:
    """The send waits in the chat's queue behind the running turn (or a paused queue)."""

    item: QueuedMessage


@dataclass(frozen=True)
class AlreadySaved:
    """A resend of the question the running turn answers already: nothing more to do."""


SendResult = Started | Queued | AlreadySaved


def start_turn(
    user_id: int,
    is_admin: bool,
    chat_id: str,
    send: Send,
    *,
    client: dict[str, Any] | None = None,
) -> SendResult:
    """Start the turn of a checked `send`; nothing is saved when a check fails.
    `client` says who sent it (web.request_kind.request_client), kept with the question.

    With `send.queue` a send that finds a turn running (or follow-ups waiting before it)
    is queued instead (`Queued`), and starts after the turns before it. A resend of a
    saved question is queued too unless the running turn is its own (`AlreadySaved`: that
    turn answers it); its queued turn answers it when it is still unanswered. Without
    `queue` a running turn refuses the send (`turn_running`)."""
    checked = check_send(user_id, chat_id, send)
    queue = send.queues
    manager = turn_manager()
    if queue and checked.saved and send.request_id is not None:
        own_turn = manager.request_turn(chat_id, send.request_id)
        if own_turn == "live":
            db.session.commit()
            return AlreadySaved()
        if own_turn == "dead":
            # Its process died; the turn holds the chat until its lease lapses, and no turn
            # end would start a queued copy: the client retries after that.
            raise turn_running()
    # (A saved question whose turn died while another turn ran is queued like a new one.)
    if queue and (manager.is_running(chat_id) or followups.list_items(user_id, chat_id)):
        item = enqueue(user_id, chat_id, send, checked.attachments)
        if not manager.is_running(chat_id):
            # Nothing runs (the queue was paused): the first waiting one goes now.
            start_next(chat_id)
        return Queued(item)
    try:
        turn = begin_turn(checked, is_admin=is_admin, client=client)
    except NumiError as exc:
        # A turn this process could not see yet holds the chat (its owner took its lease
        # back after Redis lost its data): a send that may queue waits behind it.
        if (
            exc.code != "turn_running"
            or not queue
            or checked.saved
            # its own turn, whose process died
            or getattr(exc, "request_id", None) == send.request_id
        ):
            raise
        db.session.rollback()
        return Queued(enqueue(user_id, chat_id, send, checked.attachments))
    return AlreadySaved() if turn is None else Started(turn)


def stop_turn(
    chat_id: str, user_id: int, *, clear_queue: Any = False, lane: Any = None, write: Any = False
) -> tuple[bool, int]:
    """Stop the running turn; with clear_queue, drop what waits first (else the next one
    starts as this one ends); with `lane`, stop only that lane of a compare turn (the
    others go on); with `write`, a research run stops gathering and writes its report
    (the turn goes on; False when no run gathers). Returns (stopped, how many queued were
    dropped)."""
    if parse_bool(write, "write"):
        return request_write(user_id, chat_id), 0
    if isinstance(lane, str) and lane.isdecimal() and len(lane) == 1:
        lane = int(lane)  # from a form
    if lane in ("", None):
        lane = None
    elif not isinstance(lane, int) or isinstance(lane, bool) or not 0 <= lane < MAX_LANES:
        raise invalid(f"lane must be a lane number, 0 to {MAX_LANES - 1}.", "invalid_lane")
    cleared = 0
    if parse_bool(clear_queue, "clear_queue"):
        cleared = followups.clear(chat_id)
        publish_queue(chat_id, user_id)
    return turn_manager().stop(chat_id, lane), cleared
