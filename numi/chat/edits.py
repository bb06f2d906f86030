"""Transcript edits: edit a question, regenerate an answer, delete messages, fork, outline.

Rules every function here keeps:
- nothing changes while a turn runs in the chat (409 `turn_running`): the running turn
  would save its answer into a transcript that no longer has its question;
- every check (ownership, message, attachments, route) happens before the first write, and
  the writes of one operation are one transaction: a failed request changes nothing;
- an edit or a regenerate replaces nothing for good: the replaced messages stay as an
  inactive version (`numi.chat.versions`) that `switch_version` shows again; what the model
  sees is the active branch only, as if the old messages were gone;
- deleting is a soft delete (`deleted_at`), like everywhere else, and never leaves an
  assistant step's tool call without its result or a tool result without its call;
  deleting a version takes the rest of its branch along and shows its newest sibling;
- compaction checkpoints that summarise deleted messages are dropped, since their summary
  would bring the removed text back into the model's context (a checkpoint whose boundary
  is in an inactive version simply does not apply until that version is shown again).

The regenerated turn starts through the one send path (`numi.agent.sending.start_turn` with
`regeneration_payload()`): the agent sees the question's request id, finds the question
saved and unanswered, and answers it without saving a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update

from ..database import transaction
from ..errors import NotFound, NumiError, invalid, turn_running
from ..extensions import db, turn_manager
from ..models import Chat, Checkpoint, Message, utcnow
from . import chats, versions
from .attachments import owned_attachments

TOPIC_CHARS = 120
DELETE_SCOPES = ("message", "turn")


@dataclass
class Topic:
    """One turn of a chat in its outline: the question's id and first line."""

    message_id: int
    title: str

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "title": self.title}


def ensure_idle(chat_id: str) -> None:
    """Refuse a change to a chat whose turn is running."""
    if turn_manager().is_running(chat_id):
        raise turn_running()


def get_message(chat: Chat, message_id: Any, *, any_version: bool = False) -> Message:
    """The chat's shown message `message_id` (with `any_version`, also one of an inactive
    version), or NotFound (the chat is already the user's)."""
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        raise NotFound("message")
    shown = Message.deleted_at.is_(None) if any_version else Message.shown()
    message = db.session.execute(
        select(Message).where(Message.id == message_id, Message.chat_id == chat.id, shown)
    ).scalar_one_or_none()
    if message is None:
        raise NotFound("message")
    return message


def edit_message(
    user_id: int, chat_id: str, message_id: int, text: Any, attachments: Any, limits
) -> Message:
    """Ask a question again with new text and attachments: a new version of the question,
    saved beside the old one (which keeps its answers as an inactive version).

    Returns the new question (with its own request id) ready for `regeneration_payload()`.
    """
    chat = chats.get_chat(user_id, chat_id)
    message = get_message(chat, message_id)
    ensure_idle(chat.id)
    if message.role != "user":
        raise invalid(
            "Only your own messages can be edited; regenerate an answer instead.", "not_editable"
        )
    if not isinstance(text, str):
        raise invalid("text must be text.")
    if len(text) > limits["NUMI_MAX_MESSAGE_CHARS"]:
        raise invalid(
            f"The message is too long (at most {limits['NUMI_MAX_MESSAGE_CHARS']} characters).",
            "too_long",
        )
    ids = owned_attachments(user_id, attachments)  # before any row changes
    if not text.strip() and not ids:
        raise invalid("Write a message first.", "empty_message")
    with transaction(db.session):
        versions.unselect_children(chat.id, message.parent_id)
        kept = [p for p in message.content_parts if p.get("type") != "attachment"]
        edited = Message(chat_id=chat.id, parent_id=message.parent_id, role="user", content=text)
        edited.content_parts = kept + [{"type": "attachment", "id": a} for a in ids]
        edited.meta = {
            **message.meta,
            "edited_at": utcnow().isoformat() + "Z",
            "edit_of": message.id,
        }
        db.session.add(edited)
        db.session.flush()
        _ensure_request_id(edited)
        chats.touch(chat)
    return edited


def prepare_regenerate(user_id: int, chat_id: str, route: dict[str, Any] | None, limits) -> Message:
    """Drop the last answer (everything after the last question) to answer it again,
    optionally on another endpoint/model (`route`: {endpoint_id, model}), stored first."""
    chat = chats.get_chat(user_id, chat_id)
    ensure_idle(chat.id)
    question = db.session.execute(
        select(Message)
        .where(Message.chat_id == chat.id, Message.role == "user", Message.shown())
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    if question is None:
        raise NumiError("nothing_to_regenerate", "There is no question to answer again.", 409)
    if route:
        chats.update_chat(user_id, chat.id, route, limits)  # validates everything before writing
    with transaction(db.session):
        # The answer (and every later row) stays as an inactive version; the next one saved
        # under the question becomes the shown version.
        versions.unselect_children(chat.id, question.id)
        _ensure_request_id(question)
    return question


def prepare_retry(user_id: int, chat_id: Any, after_id: Any) -> Message:
    """Answer the newest question again after its turn failed (the page's Retry).

    `after_id` is the message the Retry was drawn after: the failed answer it sits on, or
    the newest message the page had when the turn failed. It must still be the end of the
    transcript: a Retry left on an older failure would otherwise answer a newer question
    (409 `retry_stale`), as would one whose question has been answered since. The failed
    answer is set aside (`versions.continue_turn`): the retry's answer becomes its next
    version. Returns the question, ready for `regeneration_payload()`."""
    chat = chats.get_chat(user_id, chat_id)
    if not isinstance(after_id, int) or isinstance(after_id, bool):
        raise invalid("message_id must name the message the Retry belongs to.")
    ensure_idle(chat.id)
    tip = db.session.execute(
        select(Message)
        .where(Message.chat_id == chat.id, Message.shown())
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    if tip is None:
        raise NumiError("nothing_to_retry", "There is no question to answer again.", 409)
    if tip.id != after_id and tip.parent_id == after_id and versions.is_failed_answer(tip.id):
        # Drawn at its turn's error, before the failed answer was saved (the page renders
        # the error as it arrives; the save may land a moment later): it is this failure's.
        after_id = tip.id
    answered = tip.role == "assistant" and not tip.tool_calls and not tip.meta.get("partial")
    if tip.id != after_id or answered:
        raise NumiError(
            "retry_stale",
            "This Retry belongs to an earlier answer: the chat has moved on since. "
            "Use Regenerate on the newest answer instead.",
            409,
        )
    tree = versions.load_tree(chat.id)
    question_id = next(
        (i for i in reversed(versions.path_to(tree, tip.id)) if tree[i].role == "user"), None
    )
    if question_id is None:
        raise NumiError("nothing_to_retry", "There is no question to answer again.", 409)
    question = get_message(chat, question_id)
    with transaction(db.session):
        versions.continue_turn(chat.id, question.id)
        _ensure_request_id(question)
    return question


def switch_version(user_id: int, chat_id: str, message_id: int) -> Message:
    """Show version `message_id` (and the branch below it that was last shown) instead of
    its siblings. Saved, so a reload or another tab shows the same; 409 while a turn runs."""
    chat = chats.get_chat(user_id, chat_id)
    message = get_message(chat, message_id, any_version=True)
    ensure_idle(chat.id)
    with transaction(db.session):
        versions.select_version(chat.id, message.id, message.parent_id)
    return get_message(chat, message_id, any_version=True)


def regeneration_payload(question: Message) -> dict[str, Any]:
    """The `start_turn` payload that answers the saved `question` again."""
    return {"message": question.content or " ", "request_id": question.request_id}


def delete_messages(
    user_id: int, chat_id: str, message_id: int, scope: str = "message"
) -> list[int]:
    """Soft-delete a message (scope "message") or its whole turn (scope "turn").

    A message is widened to keep tool calls paired: an assistant step goes with its tool
    results, and a tool result takes its whole step (call and every result) with it.
    Returns the ids removed.
    """
    if scope not in DELETE_SCOPES:
        raise invalid(f"scope must be one of: {', '.join(DELETE_SCOPES)}.")
    chat = chats.get_chat(user_id, chat_id)
    target = get_message(chat, message_id, any_version=True)
    ensure_idle(chat.id)
    tree = versions.load_tree(chat.id)
    if scope == "turn":
        ids = _turn_ids(tree, target)
    elif target.role == "tool":
        step = _step_of(chat, target)
        ids = [target.id] if step is None else _step_ids(chat, step)
    elif target.role == "assistant" and target.tool_calls:
        ids = _step_ids(chat, target)
    else:
        ids = [target.id]
    top = tree[min(ids)]
    siblings = [n for n in versions.children(tree, top.parent_id) if n.live and n.id not in ids]
    if siblings:
        # A version goes with the rest of its branch, and a remaining sibling is shown:
        # nothing is left that no switcher could reach.
        ids = sorted({*ids, *(i for i in versions.descendants(tree, top.id) if tree[i].live)})
    with transaction(db.session):
        db.session.execute(update(Message).where(Message.id.in_(ids)).values(deleted_at=utcnow()))
        if siblings and top.selected:
            versions.select_version(chat.id, siblings[-1].id, top.parent_id)
        _drop_checkpoints(chat, min(ids))
    return sorted(ids)


# How long a message delete can be undone (the page's toast offers Undo meanwhile).
RESTORE_SECONDS = 60


def restore_messages(user_id: int, chat_id: str, ids: Any) -> list[int]:
    """Undo a delete of shown messages made within RESTORE_SECONDS (the ids it returned):
    they are back, and their first is the version its parent shows again. A compaction
    summary the delete dropped is not: the next long turn summarises afresh. Returns the
    ids restored (none when too late)."""
    chat = chats.get_chat(user_id, chat_id)  # another user's chat: not found, first
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > 1000
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise invalid("ids must be a non-empty list of message ids.", "invalid_ids")
    ensure_idle(chat.id)
    since = utcnow() - timedelta(seconds=RESTORE_SECONDS)
    rows = list(
        db.session.execute(
            select(Message).where(
                Message.chat_id == chat.id, Message.id.in_(ids), Message.deleted_at >= since
            )
        ).scalars()
    )
    if not rows:
        return []
    top = min(rows, key=lambda row: row.id)
    with transaction(db.session):
        db.session.execute(
            update(Message)
            .where(Message.id.in_([row.id for row in rows]))
            .values(deleted_at=None)
            .execution_options(synchronize_session=False)
        )
        versions.select_version(chat.id, top.id, top.parent_id)
    return sorted(row.id for row in rows)


def fork_chat(user_id: int, chat_id: str, message_id: int) -> Chat:
    """A new chat with the transcript up to and including `message_id`.

    Attachments are shared by reference (same ids, same owner); request ids are not copied
    (they belong to the original chat's sends). A fork at an assistant step with tool calls
    takes that step's results too, so the fork starts consistent.
    """
    chat = chats.get_chat(user_id, chat_id)
    target = get_message(chat, message_id, any_version=True)
    path = versions.path_to(versions.load_tree(chat.id), target.id)  # the branch of the target
    rows = list(
        db.session.execute(
            select(Message)
            .where(Message.chat_id == chat.id, Message.deleted_at.is_(None), Message.id.in_(path))
            .order_by(Message.id)
        ).scalars()
    )
    calls = {c.get("id") for row in rows if row.role == "assistant" for c in row.tool_calls}
    answered = {row.tool_call_id for row in rows if row.role == "tool"}
    missing = calls - answered
    if missing:
        below = versions.descendants(versions.load_tree(chat.id), target.id)
        rows += list(
            db.session.execute(
                select(Message)
                .where(
                    Message.chat_id == chat.id,
                    Message.deleted_at.is_(None),
                    Message.id.in_(below),
                    Message.role == "tool",
                    Message.tool_call_id.in_(missing),
                )
                .order_by(Message.id)
            ).scalars()
        )
    fork = Chat(
        user_id=user_id,
        title=f"{chat.title} (fork)"[:300],
        endpoint_id=chat.endpoint_id,
        model=chat.model,
        settings_json=chat.settings_json,
    )
    with transaction(db.session):
        db.session.add(fork)
        db.session.flush()
        parent_id = 0  # the fork's first message
        for row in rows:
            copy = Message(
                chat_id=fork.id,
                parent_id=parent_id,
                role=row.role,
                content=row.content,
                content_parts_json=row.content_parts_json,
                reasoning_content=row.reasoning_content,
                reasoning_details_json=row.reasoning_details_json,
                tool_calls_json=row.tool_calls_json,
                tool_call_id=row.tool_call_id,
                citation_sources_json=row.citation_sources_json,
                meta_json=row.meta_json,
                model=row.model,
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cached_tokens=row.cached_tokens,
                created_at=row.created_at,
            )
            db.session.add(copy)
            db.session.flush()  # ids in transcript order on every backend
            parent_id = copy.id
    return fork


def topics(user_id: int, chat_id: str) -> list[Topic]:
    """The chat's outline: one entry per question, its first non-empty line."""
    chat = chats.get_chat(user_id, chat_id)
    rows = db.session.execute(
        select(Message.id, Message.content)
        .where(Message.chat_id == chat.id, Message.role == "user", Message.shown())
        .order_by(Message.id)
    )
    return [Topic(row.id, first_line(row.content)) for row in rows]


def first_line(content: str | None) -> str:
    """The first non-empty line of a message, cut to TOPIC_CHARS."""
    line = next((ln.strip() for ln in (content or "").splitlines() if ln.strip()), "")
    if not line:
        return "(attachments only)"
    return line if len(line) <= TOPIC_CHARS else line[: TOPIC_CHARS - 1].rstrip() + "…"


# --- internals ------------------------------------------------------------------------------


def _drop_checkpoints(chat: Chat, first_removed_id: int) -> None:
    # A summary through a removed message would bring the removed text back to the model.
    db.session.execute(
        delete(Checkpoint).where(
            Checkpoint.chat_id == chat.id, Checkpoint.through_message_id >= first_removed_id
        )
    )


def _ensure_request_id(message: Message) -> None:
    if not message.request_id:
        message.request_id = f"edit-{message.id}"


def _step_of(chat: Chat, result: Message) -> Message | None:
    """The live assistant step whose tool call `result` answers."""
    steps = db.session.execute(
        select(Message)
        .where(
            Message.chat_id == chat.id,
            Message.role == "assistant",
            Message.deleted_at.is_(None),
            Message.id <= result.parent_id if result.parent_id else Message.id < result.id,
            Message.tool_calls_json.is_not(None),
        )
        .order_by(Message.id.desc())
        .limit(50)
    ).scalars()
    return next(
        (s for s in steps if any(c.get("id") == result.tool_call_id for c in s.tool_calls)), None
    )


def _step_ids(chat: Chat, step: Message) -> list[int]:
    call_ids = [c.get("id") for c in step.tool_calls if c.get("id")]
    results = (
        db.session.execute(
            select(Message.id).where(
                Message.chat_id == chat.id,
                Message.role == "tool",
                Message.deleted_at.is_(None),
                Message.id > step.id,
                Message.tool_call_id.in_(call_ids),
            )
        ).scalars()
        if call_ids
        else []
    )
    return [step.id, *results]


def _turn_ids(tree: dict[int, versions.Node], target: Message) -> list[int]:
    """The question at or above `target` in its branch and what follows it in that branch
    up to the next question (the shown version of each step)."""
    path = [tree[i] for i in versions.path_to(tree, target.id) if tree[i].live]
    questions = [n for n in path if n.role == "user"]
    # Answers before any question (an imported transcript): from the top of the branch.
    start = questions[-1] if questions else path[0]
    ids = [start.id]
    node = start
    while True:
        below = [n for n in versions.children(tree, node.id) if n.selected] or versions.children(
            tree, node.id
        )[-1:]
        if not below:
            break
        node = below[0]
        if node.live and node.role == "user":
            break
        if node.live:
            ids.append(node.id)
    return ids
