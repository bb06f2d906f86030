"""Chat titles: a short title from the model after the first answer, or the first words.

Runs after the turn has ended (the composer is free again) and publishes `title_update`
on the chat's channel, so open pages update the header and the sidebar live.
"""

from __future__ import annotations

import logging
import re

import gevent
from sqlalchemy import bindparam, select, update

from ..extensions import db
from ..models import Chat, Message
from ..providers import ChatRequest
from ..providers.events import StreamError, TextDelta

log = logging.getLogger(__name__)

DEFAULT_TITLE = "New chat"
PROMPT = (
    "Write a short title (at most six words) for the conversation below. "
    "Answer with the title only: no quotes, no punctuation at the end."
)


_chats, _messages = Chat.__table__.c, Message.__table__.c
# Built once (every first answer runs them); bound names are not the table's column names.
_FIRST_TWO = (
    select(_messages.role, _messages.content)
    .where(
        _messages.chat_id == bindparam("chat_id"),
        _messages.active.is_(True),
        _messages.deleted_at.is_(None),
        _messages.role.in_(("user", "assistant")),
    )
    .order_by(_messages.id)
    .limit(2)
)
_LIVE_CHAT = (
    _chats.id == bindparam("chat"),
    _chats.user_id == bindparam("user"),
    _chats.deleted_at.is_(None),
)
_TITLE = select(_chats.title).where(*_LIVE_CHAT)
_SET_TITLE = (
    update(Chat.__table__)
    .where(*_LIVE_CHAT, _chats.title == DEFAULT_TITLE)
    .values(title=bindparam("new_title"))
)


def first_words(text: str, limit: int = 60) -> str:
    """A title from the start of the question: one line, cut at a word boundary."""
    line = " ".join((text or "").split())
    if len(line) <= limit:
        return line or DEFAULT_TITLE
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut or line[:limit]) + "…"


def clean_title(raw: str, limit: int = 80) -> str:
    text = (raw or "").strip().splitlines()[0] if (raw or "").strip() else ""
    text = re.sub(r"^(title:\s*)", "", text, flags=re.I).strip().strip("\"'*`#").strip()
    return text[:limit].rstrip(" .") if text else ""


def generate_title(
    app,
    channel,
    turn_id: str,
    user_id: int,
    chat_id: str,
    adapter,
    model: str,
    first_question: str | None = None,
) -> None:
    """Set the chat's title if it still has the default one, and publish `title_update`.
    `first_question`: the chat's first question when the caller knows it (the turn of an
    empty chat); the first words of it need no query, the model's title needs the answer."""
    generate = app.config["NUMI_GENERATE_TITLES"]
    if first_question is not None and not generate:
        question, answer = first_question, ""
    else:
        rows = db.session.execute(_FIRST_TWO, {"chat_id": chat_id}).all()
        question = next((content for role, content in rows if role == "user"), "") or ""
        answer = next((content for role, content in rows if role == "assistant"), "") or ""
        db.session.remove()
    title = ""
    if generate:
        title = _ask_model(adapter, model, question, answer)
    title = title or first_words(question)
    title = title[: app.config["NUMI_MAX_TITLE_CHARS"]]
    # Only over the default title: one UPDATE, no row read first.
    named = db.session.execute(
        _SET_TITLE, {"chat": chat_id, "user": user_id, "new_title": title}
    ).rowcount
    db.session.commit()
    if not named:
        current = db.session.execute(_TITLE, {"chat": chat_id, "user": user_id}).scalar()
        db.session.remove()
        if current is None:
            return  # deleted meanwhile
        # Renamed by the user meanwhile: theirs wins, and is what `title_update` names (a
        # stream that ended its turn waits for this event).
        title = current
    channel.publish(turn_id, "title_update", {"title": title})


def _ask_model(adapter, model: str, question: str, answer: str) -> str:
    request = ChatRequest(
        model=model,
        messages=[
            {
                "role": "user",
                "content": f"{PROMPT}\n\nUser: {question[:2000]}\n\nAssistant: {answer[:1000]}",
            }
        ],
        max_tokens=30,
    )
    text = ""
    stream = adapter.stream(request)
    try:
        with gevent.Timeout(20):
            for event in stream:
                if isinstance(event, TextDelta):
                    text += event.text
                elif isinstance(event, StreamError):
                    return ""
    except gevent.Timeout:
        log.info("title generation timed out")
        return ""
    finally:
        stream.close()
    return clean_title(text)
