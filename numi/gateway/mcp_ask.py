"""The MCP tool `ask`: a question asked through the durable turn engine, answered as a chat.

The question starts a turn as any send does (numi.agent.sending.start_turn): the chat's
route and fallbacks, budgets, saving and recovery are the page's. A new chat is marked
with the key's name (as /v1's kept chats are) and runs no Numi tools; `chat_id`
continues a chat this same key started, never another, so a client cannot run a chat's
tools or read its approvals. The request waits for the turn's end on the chat's channel
(no database transaction held meanwhile) up to ASK_WAIT_SECONDS; a turn still running
then goes on, and the result says to read the chat later. An answered question counts on
the Usage page under the key, as a /v1 call does.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Flask
from sqlalchemy import select

from ..agent.send import Send
from ..agent.sending import Started, start_turn
from .. import endpoints as endpoint_store
from ..chat import chats as chat_store
from ..errors import NumiError, invalid, turn_running
from ..extensions import db, turn_manager
from ..models import Chat, Message, User
from .keys import Grant, allows_endpoint
from .models import resolve
from .threads import count_request

# How long a call waits for its answer; past it the turn goes on and the chat keeps it.
ASK_WAIT_SECONDS = 300.0

ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The question."},
        "model": {
            "type": "string",
            "description": "A model name as /v1/models lists it (`<endpoint>/<model>`, "
            "`project/<name>` or an alias); default: the user's default model, or the "
            "continued chat's.",
        },
        "chat_id": {
            "type": "string",
            "description": "Continue this chat (one an earlier ask of this key returned).",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}


def ask(app: Flask, key: Grant, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Ask (the tool's arguments checked), wait for the answer: (its text, the result)."""
    most = app.config["NUMI_MAX_MESSAGE_CHARS"]
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip() or len(message) > most:
        raise invalid(
            f"Give `message`: the question, up to {most} characters.", "invalid_arguments"
        )
    fields: dict[str, Any] = {}
    model = arguments.get("model")
    if model is not None:
        if not isinstance(model, str) or not model:
            raise invalid("`model` is a name /v1/models lists.", "invalid_arguments")
        resolved = resolve(key.user_id, key, model)
        first = resolved.routes[0]
        fields = {"endpoint_id": first.endpoint_id, "model": first.model}
        fallbacks = [{"endpoint_id": r.endpoint_id, "model": r.model} for r in resolved.routes[1:]]
        fields["settings"] = {"fallbacks": fallbacks}
        if resolved.project_id is not None:
            fields["project_id"] = resolved.project_id
    chat_id = arguments.get("chat_id")
    manager = turn_manager()
    made = None
    if chat_id is not None:
        chat = chat_store.get_chat(key.user_id, chat_id if isinstance(chat_id, str) else "")
        if chat.api_key_id != key.id:
            raise NumiError(
                "ask_foreign_chat",
                "ask continues only the chats this key started; start a new one without chat_id.",
                403,
            )
        if manager.is_running(chat.id):
            raise turn_running()
        _check_endpoint(key, fields.get("endpoint_id", chat.endpoint_id))
        if fields:
            chat = chat_store.update_chat(key.user_id, chat.id, fields, app.config)
    else:
        default = endpoint_store.default_route(key.user_id) if not fields else None
        if not fields and default is None:
            # Refused before a chat is made: the question would only meet the same refusal.
            raise NumiError(
                "no_model",
                "No model to ask: add an endpoint (Settings → Endpoints), or name a model "
                "as /v1/models lists it.",
                400,
            )
        _check_endpoint(key, fields.get("endpoint_id", default.id if default else None))
        # No Numi tools: an API client's question never runs them (the default).
        settings = {**fields.get("settings", {}), "tools": []}
        chat = made = chat_store.create_chat(
            key.user_id, {**fields, "settings": settings}, app.config
        )
        chat.api_key_id, chat.api_key_name = key.id, key.name
        db.session.commit()
    user = db.session.get(User, key.user_id)
    # Follow the chat from now before the turn starts: none of its events is missed.
    subscription, backlog = manager.subscribe(chat.id, manager.last_event_id(chat.id))
    try:
        try:
            started = start_turn(
                key.user_id,
                bool(user and user.is_admin),
                chat.id,
                Send(message=message),
                client={"kind": "mcp", "via": "ask", "api_key": key.name},
            )
        except NumiError:
            db.session.rollback()
            if made is not None:  # a refused question leaves no empty chat behind
                db.session.delete(db.session.get(Chat, made.id))
                db.session.commit()
            raise
        if not isinstance(started, Started):
            raise turn_running()
        chat_id = chat.id
        db.session.commit()  # no transaction is held while the model answers
        ended, error = _wait(subscription, backlog, started.turn.id)
    finally:
        subscription.close()
    return _result(key, chat_id, ended, error)


def _check_endpoint(key: Grant, endpoint_id: int | None) -> None:
    if endpoint_id is not None and not allows_endpoint(key, endpoint_id):
        raise NumiError(
            "api_key_scope", "This key may not use that endpoint (its scopes leave it out).", 403
        )


def _wait(subscription: Any, backlog: list[dict], turn_id: str) -> tuple[bool, dict | None]:
    """Follow the turn's events to its end: (ended, its error event's data or None)."""
    deadline = time.monotonic() + ASK_WAIT_SECONDS
    error = None
    pending = list(backlog)
    while True:
        if pending:
            event = pending.pop(0)
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, error
            event = subscription.get(timeout=min(left, 15.0))
            if event is None:
                if subscription.closed:
                    return False, error
                continue
        if event.get("turn_id") not in (None, turn_id):
            continue
        kind, data = event["type"], event.get("data") or {}
        if kind == "error":
            error = data
        if kind == "turn_end" or (kind == "snapshot" and data.get("finished")):
            return True, error


def _result(
    key: Grant, chat_id: str, ended: bool, error: dict | None
) -> tuple[str, dict[str, Any]]:
    answer = db.session.execute(
        select(Message)
        .where(Message.chat_id == chat_id, Message.role == "assistant", Message.shown())
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    if ended:
        # The key's row on the Usage page, as a /v1 call's: the answer's tokens (none
        # when the turn failed). A turn still running after the wait counts under its
        # model only, with its answer.
        answered = answer is not None and error is None
        count_request(
            key.user_id,
            key.id,
            answer.model if answered else None,
            (answer.input_tokens, answer.output_tokens) if answered else (None, None),
            chat_id,
        )
    db.session.commit()
    text = (answer.content or "") if answer is not None and ended else ""
    result: dict[str, Any] = {
        "chat_id": chat_id,
        "answer": text,
        "model": answer.model if answer is not None and ended else None,
        "finished": ended,
    }
    if error is not None:
        raise NumiError(
            str(error.get("code") or "turn_failed"),
            f"The model did not answer: {error.get('message')} (chat_id {chat_id}).",
            502,
        )
    if not ended:
        return (
            f"Still answering after {int(ASK_WAIT_SECONDS)} s; read_chat {chat_id} later.",
            result,
        )
    return text, result
