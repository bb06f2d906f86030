"""Starting a send's turn now: the checks of a `Send` against the database, then the
`TurnRequest` handed to the TurnManager.

Both ways a turn starts go through here: `numi.agent.sending.start_turn` (a client's send,
which may instead queue) and `numi.agent.followup_queue.start_next` (a queued follow-up
whose turn comes). Nothing is saved when a check fails.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select

from ..chat.attachments import owned_rows
from ..chat.request_meta import request_metadata
from ..errors import NotFound, NumiError
from ..extensions import db, turn_manager
from ..models import Chat, Message
from ..models.columns import loads
from ..turns.turn import Turn, TurnRequest
from .lanes import check_compare, compare_unsupported
from .send import Send


@dataclass(frozen=True)
class SendChat:
    """What starting a turn reads of its chat."""

    id: str
    tools: list[str]  # the chat's tools setting, kept with the question
    temporary: bool


_chats = Chat.__table__.c
# Built once, three columns: every send reads it (a Chat entity cost about four times as
# much to load, and was loaded again after the commit in begin_turn expired it).
_SEND_CHAT = select(_chats.id, _chats.settings_json, _chats.temporary).where(
    _chats.id == bindparam("chat_id"),
    _chats.user_id == bindparam("user_id"),
    _chats.deleted_at.is_(None),
)


def _send_chat(user_id: int, chat_id: str) -> SendChat:
    """The user's live chat `chat_id` (as `chats.get_chat`: NotFound otherwise)."""
    if not isinstance(chat_id, str) or len(chat_id) > 36:
        raise NotFound()
    row = db.session.execute(_SEND_CHAT, {"chat_id": chat_id, "user_id": user_id}).first()
    if row is None:
        raise NotFound()
    tools = loads(row.settings_json, {}).get("tools") or []
    return SendChat(row.id, list(tools), bool(row.temporary))


@dataclass(frozen=True)
class CheckedSend:
    """A send whose chat, attachments and compared endpoints are the user's."""

    user_id: int
    chat: SendChat
    send: Send
    # The question is saved already: a retry or a regenerate (its request_id was seen).
    saved: bool
    # The compared routes as the turn takes them (`{endpoint_id, model}`); None: one answer.
    compare: list[dict[str, Any]] | None
    attachments: list[int]


def check_send(user_id: int, chat_id: str, send: Send) -> CheckedSend:
    """Check what of `send` the database decides: the chat's owner (404 otherwise), a
    reused request_id, the compared endpoints and the attachments (each still on disk)."""
    chat = _send_chat(user_id, chat_id)
    saved = send.request_id is not None and _check_request_reuse(
        chat_id, send.request_id, send.message
    )
    compare = None
    if send.compare is not None:
        compare = check_compare(user_id, send.compare)
        if saved:
            # A regenerate or a retry of a saved question answers it in one version.
            raise compare_unsupported("a question that is saved already (a retry or a regenerate)")
    attachments = [row.id for row in owned_rows(user_id, list(send.attachments))]
    return CheckedSend(user_id, chat, send, saved, compare, attachments)


def begin_turn(
    checked: CheckedSend, *, is_admin: bool, client: dict[str, Any] | None
) -> Turn | None:
    """Hand the checked send to the TurnManager. None: the chat's running turn is this
    very request (a resend), which answers it. Raises `turn_running` when another runs."""
    chat, send = checked.chat, checked.send
    db.session.commit()  # end the read transaction before the producer starts writing
    options: dict[str, Any] = {}
    if checked.compare is not None:
        options["compare"] = checked.compare
    request_id = send.request_id
    if send.exempt:
        options["exempt"] = list(send.exempt)  # this turn's requests only: never stored
    if send.research is not None:
        options["research"] = send.research.to_dict()
        # A research run is found again by its question's request_id after a restart.
        request_id = request_id or uuid.uuid4().hex
    request = TurnRequest(
        user_id=checked.user_id,
        chat_id=chat.id,
        message=send.message,
        attachments=checked.attachments,
        request_id=request_id,
        timezone=send.timezone,
        tz_offset_minutes=send.tz_offset,
        is_admin=is_admin,
        options=options,
        question_new=not checked.saved,
        metadata=request_metadata(
            send.flags,
            timezone=send.timezone,
            tz_offset=send.tz_offset,
            tools=chat.tools,
            client=client,
            mode="compare"
            if checked.compare is not None
            else "research"
            if send.research is not None
            else "temporary"
            if chat.temporary
            else "chat",
        ),
    )
    return turn_manager().start(request)


# Built once: every send with a request_id (the page's all are) asks.
_messages = Message.__table__.c
_SAVED_QUESTION = select(_messages.content).where(
    _messages.chat_id == bindparam("chat_id"), _messages.request_id == bindparam("request_id")
)


def _check_request_reuse(chat_id: str, request_id: str, message: str) -> bool:
    """A resent request_id is a retry of the same question; with other text it is a
    client bug that would silently get the old answer, so it is refused. True when the
    question is saved already."""
    saved = db.session.execute(
        _SAVED_QUESTION, {"chat_id": chat_id, "request_id": request_id}
    ).first()
    if saved is not None and (saved.content or "").strip() != message.strip():
        raise NumiError(
            "request_id_reused",
            "This request_id was used for another message; send a new request_id.",
            409,
        )
    return saved is not None
