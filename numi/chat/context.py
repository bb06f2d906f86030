"""ChatContextService: the bridge between stored messages and the history a model sees.

It loads the chat's settings and its recent history (bounded by
PROMPT_MAX_HISTORY_MESSAGES and PROMPT_MAX_HISTORY_CHARS, in whole turns so a request never
starts with an orphan tool result), converts rows to the internal message dicts the agent
works with, and saves new messages. Loading is bounded: it reads at most the newest
`max_messages + 1` rows, however long the chat.

The service caches chat metadata and loaded history for its own lifetime (one turn): the
history's rows are read once, and a message the turn saves is added to them, so a turn of
many steps reads its history once (the budget is applied again to the rows, as a fresh
load would). A checkpoint, a continued turn or `invalidate_history` reload it.

A turn's queries run on every send, so they are Core statements built once
(`context_rows`), on Table columns: no ORM entity loading or unit of work, no statement
building or cache key per call. The ORM stays where a query returns objects to other
modules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from ..database import transaction
from ..errors import NumiError
from ..extensions import db
from ..models import Chat, Checkpoint, Message, utcnow
from ..models.columns import loads
from . import context_rows as stored, versions
from .attachments import message_attachment_ids, text_sizes
from .token_estimate import estimate_all, text_tokens

# Short: on a small local model's window (2k-8k tokens, or llama-server's -c 256) every
# token of the notice is one less for the conversation (issue 44).
OMITTED_NOTICE = "(Earlier messages were left out. Ask me if something seems missing.)"


# Opens a history whose first question the user left out of the context.
LEFT_OUT_QUESTION = "(A question left out of the context by the user.)"


class ChatDeleted(NumiError):
    def __init__(self) -> None:
        super().__init__("chat_deleted", "This chat was deleted while the turn was running.", 410)


@dataclass
class ChatMeta:
    """A plain copy of the chat row: safe to use after the session is gone."""

    id: str
    user_id: int
    title: str
    endpoint_id: int | None
    model: str | None
    settings: dict[str, Any]
    project_id: int | None = None
    temporary: bool = False  # uses no memory and offers no tool that writes one


@dataclass
class History:
    messages: list[dict[str, Any]]
    omitted: int
    checkpoint_id: int | None
    total_chars: int
    omitted_chars: int = 0  # characters of the omitted messages (for token estimates)


@dataclass
class _LoadedRows:
    """What one history load read: the newest rows (oldest first, at most max_messages + 1
    of them, as internal dicts with whether each is an error placeholder), the count of
    all live rows when the limit cut them, and the checkpoint they follow."""

    rows: list[tuple[dict[str, Any], bool]]
    total: int | None
    checkpoint: Any


class ChatContextService:
    def __init__(
        self,
        chat_id: str,
        user_id: int,
        *,
        max_messages: int,
        max_chars: int,
        before_save: Callable[[], None] | None = None,
    ):
        self.chat_id = chat_id
        self.user_id = user_id
        # Called before every save and checkpoint (a running turn's lease check: a turn
        # that no longer holds its chat raises there, and writes nothing).
        self.before_save = before_save
        self.max_messages = max_messages
        self.max_chars = max_chars
        self._meta: ChatMeta | None = None
        self._history: History | None = None
        self._loaded: _LoadedRows | None = None

    # --- metadata ---------------------------------------------------------------------------

    def meta(self) -> ChatMeta:
        if self._meta is None:
            self._read_meta(stored.LIVE_CHAT)
        assert self._meta is not None
        return self._meta

    def start(self) -> tuple[ChatMeta, int | None]:
        """A turn's start: the chat's meta and its newest message id, in one query."""
        last_id = self._read_meta(stored.LIVE_CHAT_AND_LAST).last_id
        return self.meta(), last_id

    def _read_meta(self, statement: Any) -> Any:
        chat = db.session.execute(
            statement, {"chat_id": self.chat_id, "user_id": self.user_id}
        ).first()
        if chat is None:
            raise ChatDeleted()
        self._meta = ChatMeta(
            chat.id,
            chat.user_id,
            chat.title,
            chat.endpoint_id,
            chat.model,
            loads(chat.settings_json, {}),
            chat.project_id,
            bool(chat.temporary),
        )
        return chat

    def refresh_meta(self) -> None:
        self._meta = None

    def update_route(self, endpoint_id: int, model: str) -> None:
        """Store a repaired model route on the chat."""
        chat = self._live_chat()
        chat.endpoint_id, chat.model = endpoint_id, model
        db.session.commit()
        self.refresh_meta()

    def _live_chat(self) -> Chat:
        chat = db.session.execute(
            select(Chat).where(
                Chat.id == self.chat_id, Chat.user_id == self.user_id, Chat.deleted_at.is_(None)
            )
        ).scalar_one_or_none()
        if chat is None:
            raise ChatDeleted()
        return chat

    # --- history ----------------------------------------------------------------------------

    def history(self) -> History:
        """The history to send: checkpoint summary, then the newest whole turns in budget."""
        if self._history is None:
            if self._loaded is None:
                self._loaded = self._load_rows()
            self._history = self._build_history(self._loaded)
        return self._history

    def _load_rows(self) -> _LoadedRows:
        """Read the newest max_messages + 1 rows of the history (one query, and one count
        when there are more), after the newest valid checkpoint."""
        checkpoint = db.session.execute(stored.CHECKPOINT, {"chat_id": self.chat_id}).first()
        # Messages the user left out of the context are not loaded (chat/leave_out.py keeps
        # a tool step and its results together, so none is cut from its group).
        params: dict[str, Any] = {"chat_id": self.chat_id}
        if checkpoint is not None:
            params["after"] = checkpoint.through_message_id
        where = self.history_rows()
        if where is None:
            page = stored.history_page(checkpoint is not None, self.max_messages + 1)
        else:
            page = stored.history_page_where(where, checkpoint is not None, self.max_messages + 1)
        rows = [
            (stored.internal(row), _is_error_placeholder(row))
            for row in db.session.execute(page, params)
        ]
        rows.reverse()
        total = None
        if len(rows) > self.max_messages:
            # Counted from ix_messages_chat_live alone, without reading the rows (a 5,000-row
            # chat would otherwise re-read them all at every turn).
            count = (
                stored.HISTORY_COUNT[checkpoint is not None]
                if where is None
                else stored.history_count_where(where, checkpoint is not None)
            )
            total = db.session.execute(count, params).scalar_one()
        return _LoadedRows(rows, total, checkpoint)

    def _build_history(self, loaded: _LoadedRows) -> History:
        """The history from loaded rows: whole turns within the budgets, the notices."""
        checkpoint = loaded.checkpoint
        truncated = len(loaded.rows) > self.max_messages
        rows = loaded.rows[-self.max_messages :] if self.max_messages else []
        loaded_count = len(rows)
        kept_rows = [message for message, placeholder in rows if not placeholder]
        placeholders = loaded_count - len(kept_rows)
        # Copies: a request may change its messages, the loaded rows stay as read.
        internal = _without_orphan_results([dict(m) for m in kept_rows])
        _count_attachments(internal)
        # Without the row limit, a first group that starts with an answer is one whose
        # question the user left out of the context: it stays (a placeholder question opens
        # it below, as every protocol wants a user message first).
        turns = _group_turns(internal, keep_leading=not truncated)
        # A group cut by the row limit starts with an assistant or tool row; _group_turns
        # has dropped it already. A group that starts with its user row is whole.
        kept: list[list[dict[str, Any]]] = []
        chars = 0
        for group in reversed(turns):
            size = sum(_chars(m) for m in group)
            if kept and (chars + size > self.max_chars):
                break
            if not kept and size > self.max_chars:
                raise NumiError(
                    "context_budget",
                    "The latest message is too long for the context budget. Compact the chat, "
                    "remove an attachment, or raise PROMPT_MAX_HISTORY_CHARS.",
                    413,
                )
            kept.append(group)
            chars += size
        kept.reverse()
        # A group that opens with an answer is one whose question the user left out (at the
        # start or in the middle): a placeholder question opens it, so the roles alternate
        # as every protocol wants (Anthropic refuses two assistant messages in a row).
        messages = [
            m
            for group in kept
            for m in (
                group
                if group[0]["role"] == "user"
                else [{"role": "user", "content": LEFT_OUT_QUESTION, "_placeholder": True}, *group]
            )
        ]
        omitted = len(kept_rows) - sum(1 for m in messages if not m.get("_placeholder"))
        kept_ids = {id(m) for m in messages}
        omitted_chars = sum(_chars(m) for m in internal if id(m) not in kept_ids)
        if truncated:  # exact: count what the row limit left unread
            unread = max(0, loaded.total - loaded_count)
            omitted = (
                loaded.total - sum(1 for m in messages if not m.get("_placeholder")) - placeholders
            )
            # Their size is estimated from the loaded rows' average, as token counts are
            # estimates anyway.
            average = sum(_chars(m) for m in internal) / max(1, len(internal))
            omitted_chars += int(unread * average)
        prefix: list[dict[str, Any]] = []
        if checkpoint is not None:
            prefix.append(
                {
                    "role": "user",
                    "content": f"Summary of the earlier conversation:\n{checkpoint.summary}",
                    "_checkpoint": checkpoint.id,
                }
            )
            prefix.append(
                {
                    "role": "assistant",
                    "content": "Understood; I will continue from that summary.",
                    "_checkpoint": checkpoint.id,
                }
            )
        if omitted:
            prefix.append({"role": "user", "content": OMITTED_NOTICE, "_notice": True})
            prefix.append({"role": "assistant", "content": "Understood.", "_notice": True})
        return History(
            prefix + messages, omitted, checkpoint.id if checkpoint else None, chars, omitted_chars
        )

    def history_rows(self) -> Any | None:
        """Which rows the history is read from: None for the transcript (its statements
        are built once); a compare lane gives a where clause for its own branch
        (agent/lanes.py)."""
        return None

    def _saved_to_history(self, message: dict[str, Any]) -> None:
        """Add a message this service has just saved to the loaded rows, as the next load
        would read it (it is the newest row, shown and in context)."""
        loaded = self._loaded
        self._history = None
        if loaded is None:
            return
        # Its attachments are counted on load (a tool result's images are not attachments).
        if message_attachment_ids(message.get("_content_parts")):
            self._loaded = None
            return
        loaded.rows.append((message, _is_error_placeholder_values(message)))
        if loaded.total is not None:
            loaded.total += 1
        elif len(loaded.rows) > self.max_messages:
            loaded.total = len(loaded.rows)  # every live row was loaded until now
        del loaded.rows[: -(self.max_messages + 1)]

    def invalidate_history(self) -> None:
        self._history = None
        self._loaded = None

    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest valid checkpoint: its boundary message still exists in the transcript
        (an edit that deleted the boundary makes a checkpoint stale, and an older one applies)."""
        live = select(Message.id).where(
            Message.chat_id == self.chat_id,
            Message.shown(),
            Message.id == Checkpoint.through_message_id,
        )
        return db.session.execute(
            select(Checkpoint)
            .where(Checkpoint.chat_id == self.chat_id, live.exists())
            .order_by(Checkpoint.id.desc())
            .limit(1)
        ).scalar_one_or_none()

    def save_checkpoint(self, **fields: Any) -> Checkpoint:
        """Store a compaction checkpoint (its own short transaction); the history reloads."""
        if self.before_save is not None:
            self.before_save()
        with transaction(db.session):
            self._live_chat()
            checkpoint = Checkpoint(chat_id=self.chat_id, **fields)
            db.session.add(checkpoint)
        self.invalidate_history()
        return checkpoint

    # --- saving -----------------------------------------------------------------------------

    def find_request(self, request_id: str) -> Any | None:
        """The saved question of a send's request_id: its `id` and `active`, or None."""
        return db.session.execute(
            stored.FIND_REQUEST, {"chat_id": self.chat_id, "request_id": request_id}
        ).one_or_none()

    def turn_row_ids(self, question_id: int) -> list[int]:
        """The ids of the rows a question's turns saved below it (every version)."""
        return [n.id for n in versions.turn_rows(versions.load_tree(self.chat_id), question_id)]

    def continue_turn(self, question_id: int) -> bool:
        """Let the next saved row continue `question_id`'s own turn (versions.continue_turn);
        its own transaction. Returns whether the transcript changed."""
        with transaction(db.session):
            changed = versions.continue_turn(self.chat_id, question_id)
        self.invalidate_history()
        return changed

    def branch_tip(self) -> int | None:
        """The newest row of the shown branch: what the next saved message follows."""
        return db.session.execute(
            select(Message.id)
            .where(Message.chat_id == self.chat_id, Message.active.is_(True))
            .order_by(Message.id.desc())
            .limit(1)
        ).scalar_one_or_none()

    def save(self, **fields: Any) -> Message:
        """Insert one message in its own short transaction; the chat moves to the top.

        Raises ChatDeleted (and writes nothing) when the chat was deleted meanwhile. The
        message returned is not in the session: it carries the saved values and its id.
        """
        if self.before_save is not None:
            self.before_save()
        values = stored.message_values(fields)
        values["chat_id"] = self.chat_id
        with transaction(db.session):
            # One UPDATE both moves the chat to the top and proves it is still live.
            touched = db.session.execute(
                stored.TOUCH_CHAT,
                {"touch_chat": self.chat_id, "touch_user": self.user_id, "touch_now": utcnow()},
            ).rowcount
            if touched != 1:
                raise ChatDeleted()
            if "parent_id" in fields:  # a compare lane's row, saved under its own parent
                insert, values["parent_id"] = stored.INSERT_MESSAGE_UNDER, fields["parent_id"]
            else:  # its parent is the tip of the shown branch (what the column default finds)
                insert, values["tip_chat"] = stored.INSERT_MESSAGE, self.chat_id
            message_id, parent_id = db.session.execute(insert, values).one()
            values.pop("tip_chat", None)
            values.pop("parent_id", None)
        message = Message(id=message_id, parent_id=parent_id, **values)
        self._saved_to_history(stored.internal(message))
        return message

    def release(self) -> None:
        """End the current transaction and return the connection (before a provider streams)."""
        db.session.remove()


def to_internal(row: Message) -> dict[str, Any]:
    """A stored message as the agent's OpenAI-like dict (JSON columns decoded)."""
    message: dict[str, Any] = {"role": row.role, "content": row.content or "", "_db_id": row.id}
    if row.tool_calls:
        message["tool_calls"] = row.tool_calls
    if row.tool_call_id:
        message["tool_call_id"] = row.tool_call_id
    if row.reasoning_content:
        message["reasoning_content"] = row.reasoning_content
    if row.reasoning_details:
        message["reasoning_details"] = row.reasoning_details
    if row.content_parts:
        message["_content_parts"] = row.content_parts
    return message


def _is_error_placeholder(row: Any) -> bool:
    """An answer that failed before any output: shown in the transcript, never sent."""
    return (
        row.role == "assistant"
        and not row.content
        and not row.tool_calls_json
        and not row.reasoning_content
    )


def _is_error_placeholder_values(message: dict[str, Any]) -> bool:
    """`_is_error_placeholder` of a message as `context_rows.internal` made it."""
    return (
        message["role"] == "assistant"
        and not message["content"]
        and not message.get("tool_calls")
        and not message.get("reasoning_content")
    )


def _group_turns(
    messages: list[dict[str, Any]], *, keep_leading: bool = False
) -> list[list[dict[str, Any]]]:
    """Split into groups that each start at a user message (assistant/tool stay with it).
    A final answer followed by another answer starts a group of its own: its question was
    left out of the context. A first group without its user message is dropped (a fragment
    cut off by a limit) unless `keep_leading`."""
    groups: list[list[dict[str, Any]]] = []
    for message in messages:
        if message["role"] == "user" or not groups or _answers_again(groups[-1][-1], message):
            groups.append([message])
        else:
            groups[-1].append(message)
    # A first group that does not start with a user message is a fragment cut off by the
    # limit; a later one is an answer whose question was left out.
    return [g for n, g in enumerate(groups) if g[0]["role"] == "user" or keep_leading or n > 0]


def _answers_again(previous: dict[str, Any], message: dict[str, Any]) -> bool:
    """Whether `message` is an answer right after a final answer (no tool call between):
    the answer of a question that is not in the history."""
    return (
        message["role"] == "assistant"
        and previous["role"] == "assistant"
        and not previous.get("tool_calls")
    )


def _without_orphan_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results whose call is not in the history are dropped: no provider accepts a
    result without its call (a safety net; leaving out moves whole groups)."""
    calls: set[str] = set()
    out = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            calls.add(call.get("id"))
        if message["role"] == "tool" and message.get("tool_call_id") not in calls:
            continue
        out.append(message)
    return out


def _count_attachments(messages: list[dict[str, Any]]) -> None:
    """Note on each message how many characters its attachments add (one query)."""
    ids = [i for m in messages for i in message_attachment_ids(m.get("_content_parts"))]
    if not ids:
        return
    sizes = text_sizes(ids)
    for message in messages:
        own = message_attachment_ids(message.get("_content_parts"))
        if own:
            message["_attachment_chars"] = sum(sizes.get(i, 0) for i in own)


def estimate_tokens(messages: list[dict[str, Any]], system: str = "") -> int:
    """A provider-neutral prompt size estimate: each text by its scripts
    (`token_estimate`), attachments' text at about four characters a token, plus a few
    tokens of framing per message."""
    estimate_all([system, *(text for m in messages for text in _texts(m))])
    return text_tokens(system) + sum(_tokens(m) for m in messages) + 4 * len(messages)


def _texts(message: dict[str, Any]) -> list[str]:
    """The texts `_tokens` estimates in a message."""
    content = message.get("content")
    texts = (
        [p.get("text") or "" for p in content if isinstance(p, dict)]
        if isinstance(content, list)
        else [content or ""]
    )
    calls = message.get("tool_calls") or ()
    return texts + [str(c.get("function", {}).get("arguments", "")) for c in calls]


def _tokens(message: dict[str, Any]) -> int:
    """`estimate_tokens` of one message without its framing: what `_chars` counts."""
    return _measured(message, text_tokens, image=1000, attachment_chars_per_unit=4)


def message_chars(message: dict[str, Any]) -> int:
    """Characters a message contributes to a prompt (content, tool arguments, attachments)."""
    return _chars(message)


def _chars(message: dict[str, Any]) -> int:
    return _measured(message, len, image=4000, attachment_chars_per_unit=1)


def _measured(
    message: dict[str, Any],
    measure: Callable[[str], int],
    *,
    image: int,
    attachment_chars_per_unit: int,
) -> int:
    """A message's size in `measure`'s unit: its text (or text parts, an image counting
    `image`), its attachments' text and its tool calls' arguments."""
    content = message.get("content")
    if isinstance(content, list):  # content parts built at request time
        size = sum(
            measure(p.get("text") or "") if p.get("type") != "image" else image
            for p in content
            if isinstance(p, dict)
        )
    else:
        size = measure(content or "")
        size += message.get("_attachment_chars", 0) // attachment_chars_per_unit
    for call in message.get("tool_calls") or ():
        size += measure(str(call.get("function", {}).get("arguments", "")))
    return size
