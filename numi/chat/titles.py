"""Chat titles: a short title from the model after the first answer, or the first words.

Runs after the turn has ended (the composer is free again) and publishes `title_update`
on the chat's channel, so open pages update the header and the sidebar live.
"""

from __future__ import annotations

import logging
import re

import gevent
from sqlalchemy import select

from ..extensions import db
from ..models import Chat, Message

log = logging.getLogger(__name__)

DEFAULT_TITLE = "New chat"
PROMPT = (
    "Write a short title (at most six words) for the conversation below. "
    "Answer with the title only: no quotes, no punctuation at the end."
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
    app, channel, turn_id: str, user_id: int, chat_id: str, adapter, model: str
) -> None:
    """Set the chat's title if it still has the default one, and publish `title_update`."""
    rows = db.session.execute(
        select(Message.role, Message.content)
        .where(Message.chat_id == chat_id, Message.shown(), Message.role.in_(("user", "assistant")))
        .order_by(Message.id)
        .limit(2)
    ).all()
    question = next((content for role, content in rows if role == "user"), "") or ""
    answer = next((content for role, content in rows if role == "assistant"), "") or ""
    db.session.remove()
    title = ""
    if app.config["NUMI_GENERATE_TITLES"]:
        title = _ask_model(adapter, model, question, answer)
    title = title or first_words(question)
    chat = db.session.execute(
        select(Chat).where(Chat.id == chat_id, Chat.user_id == user_id, Chat.deleted_at.is_(None))
    ).scalar_one_or_none()
    if chat is None:
        return  # deleted meanwhile
    if chat.title != DEFAULT_TITLE:
        # Renamed by the user meanwhile: theirs wins, and is what `title_update` names (a
        # stream that ended its turn waits for this event).
        title = chat.title
        db.session.remove()
        channel.publish(turn_id, "title_update", {"title": title})
        return
    chat.title = title = title[: app.config["NUMI_MAX_TITLE_CHARS"]]
    db.session.commit()
    # The local, not chat.title: the commit expired the row and reading it would query again.
    channel.publish(turn_id, "title_update", {"title": title})


def _ask_model(adapter, model: str, question: str, answer: str) -> str:
    from ..providers import ChatRequest
    from ..providers.events import StreamError, TextDelta

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
