"""A key's conversations kept as chats, and every request's usage.

API calls are stateless: each request carries the whole conversation. Numi groups them
by what they share. Each kept message is recorded with a digest of the conversation up
to it (a chain: the digest of the messages before it and its own; system prompts are
left out, since clients rewrite them freely, e.g. with today's date). A new request is
looked up by the digests of its own messages, longest first:

- it extends a kept conversation (a follow-up): its new messages continue that chat;
- it repeats one exactly (a regeneration): the answer becomes a new version of the
  answer there, as Regenerate does in the page;
- it shares only a beginning (an edited question, a removed turn): the messages after
  the shared part become a new version of what stood there, as an edit does;
- it shares nothing: a new chat, marked with the key's name.

Usage is written for every request (`ApiRequest`), kept or not; a kept answer carries
its usage in its meta too, as the page's answers do.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import insert, select, update

from ..chat import versions
from ..extensions import db
from ..models import ApiRequest, ApiThreadPoint, Chat, Message, utcnow
from ..providers.parts import plain_text
from .inbound import GatewayCall
from .relay import Answer

TITLE_CHARS = 80


def _canonical(message: dict[str, Any]) -> str:
    """A message as every client resends it: its role, its text, its tool calls (with
    their arguments as parsed JSON) and the call a result answers. Reasoning is left
    out: clients drop or keep it as they like."""
    calls = []
    for call in message.get("tool_calls") or ():
        arguments = call["function"].get("arguments") or ""
        try:
            arguments = json.loads(arguments) if arguments else {}
        except ValueError:
            pass
        calls.append([call.get("id"), call["function"].get("name"), arguments])
    return json.dumps(
        [
            message.get("role"),
            plain_text(message.get("content")),
            calls,
            message.get("tool_call_id"),
        ],
        sort_keys=True,
        ensure_ascii=False,
    )


def digests(messages: list[dict[str, Any]]) -> list[str]:
    """The chain digest after each message."""
    out, previous = [], ""
    for message in messages:
        previous = hashlib.sha256((previous + _canonical(message)).encode()).hexdigest()
        out.append(previous)
    return out


def _answer_message(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json or "{}"},
            }
            for call in answer.tool_calls
        ]
    return message


def record(
    *,
    user_id: int,
    key_id: int,
    key_name: str,
    keep: bool,
    call: GatewayCall,
    answer: Answer,
    model_name: str,
    project_id: int | None,
) -> str | None:
    """Write the request's usage and, for a key that keeps its conversations, the
    request and its answer into the chat it continues (or a new one). One short
    transaction, after the stream ended. Returns the chat's id, or None."""
    chat_id = (
        _keep(user_id, key_id, key_name, call, answer, model_name, project_id) if keep else None
    )
    usage = answer.usage
    count_request(
        user_id,
        key_id,
        answer.route.model if answer.route else None,
        (usage.input_tokens, usage.output_tokens) if usage else (None, None),
        chat_id,
    )
    db.session.commit()
    return chat_id


def count_request(
    user_id: int,
    key_id: int,
    model: str | None,
    tokens: tuple[int | None, int | None],
    chat_id: str | None,
) -> None:
    """One model request of a key (a /v1 call or MCP's `ask`) for the Usage page's rows
    per key; the caller commits. With a `chat_id` its tokens are the chat's answer's too,
    so the rows per model count them once, from the answer."""
    # A plain INSERT: no ORM object to track and flush for a row nothing reads back here.
    db.session.execute(
        insert(ApiRequest).values(
            user_id=user_id,
            key_id=key_id,
            model=model,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            chat_id=chat_id,
        )
    )


def _keep(
    user_id: int,
    key_id: int,
    key_name: str,
    call: GatewayCall,
    answer: Answer,
    model_name: str,
    project_id: int | None,
) -> str | None:
    if answer.route is None or not (answer.content or answer.tool_calls):
        return None
    messages = list(call.messages)
    chain = digests(messages)
    found = db.session.execute(
        select(ApiThreadPoint.digest, ApiThreadPoint.chat_id, ApiThreadPoint.message_id)
        .join(Chat, Chat.id == ApiThreadPoint.chat_id)
        .where(
            ApiThreadPoint.key_id == key_id,
            ApiThreadPoint.digest.in_(chain),
            Chat.user_id == user_id,
            Chat.deleted_at.is_(None),
        )
    ).all()
    known = {row.digest: row for row in found}
    shared = max((i + 1 for i, d in enumerate(chain) if d in known), default=0)
    route = answer.route
    if shared:
        point = known[chain[shared - 1]]
        chat = db.session.get(Chat, point.chat_id)
        parent = point.message_id
    else:
        first_user = next((m for m in messages if m["role"] == "user"), messages[0])
        title = " ".join(plain_text(first_user.get("content")).split())[:TITLE_CHARS]
        chat = Chat(
            user_id=user_id,
            title=title or "API chat",
            endpoint_id=route.endpoint_id,
            model=route.model,
            project_id=project_id,
            api_key_id=key_id,
            api_key_name=key_name,
        )
        db.session.add(chat)
        db.session.flush()
        parent = 0
    if call.system:
        settings = chat.settings
        if settings.get("system_prompt") != call.system:
            chat.settings = {**settings, "system_prompt": call.system}
    rows = messages[shared:] + [_answer_message(answer)]
    meta = {
        "model": route.model,
        "endpoint_id": route.endpoint_id,
        "finish_reason": answer.finish_reason,
        "usage": _usage_dict(answer),
        "api": {"key_id": key_id, "model": model_name},
    }
    # The first new row is a new version of whatever followed the shared part.
    versions.unselect_children(chat.id, parent)
    all_chain = digests(messages + [rows[-1]])
    for offset, message in enumerate(rows):
        is_answer = offset == len(rows) - 1
        row = Message(
            chat_id=chat.id,
            parent_id=parent,
            role=message["role"],
            content=plain_text(message.get("content")),
            tool_calls_json=json.dumps(message["tool_calls"])
            if message.get("tool_calls")
            else None,
            tool_call_id=message.get("tool_call_id"),
            reasoning_content=("".join(answer.reasoning) or None) if is_answer else None,
        )
        if is_answer:
            row.meta = meta
        db.session.add(row)
        db.session.flush()
        db.session.add(
            ApiThreadPoint(
                key_id=key_id,
                digest=all_chain[shared + offset],
                chat_id=chat.id,
                message_id=row.id,
            )
        )
        parent = row.id
    _show_branch(chat.id, parent)
    chat.updated_at = utcnow()
    return chat.id


def _show_branch(chat_id: str, message_id: int) -> None:
    """Make the branch that ends at `message_id` the shown one: the client continued from
    there, even if the page had since switched to another version above it."""
    tree = versions.load_tree(chat_id)
    for node_id in versions.path_to(tree, message_id):
        node = tree[node_id]
        if not node.selected:
            db.session.execute(
                update(Message)
                .where(Message.chat_id == chat_id, Message.parent_id == node.parent_id)
                .values(selected=Message.id == node_id)
                .execution_options(synchronize_session=False)
            )
    versions.refresh_active(chat_id)


def _usage_dict(answer: Answer) -> dict[str, Any] | None:
    usage = answer.usage
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }
