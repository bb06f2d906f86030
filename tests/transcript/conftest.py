"""Fixtures for transcript tests: rows built directly in an in-process app's database (the
live server and the scripted provider come from tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def rows(multi_app):
    """Build messages in user A's or B's chats: rows(user_id, [(role, content, extra), ...])."""
    from numi.extensions import db
    from numi.models import Chat, Message

    def build(
        user_id: int, messages, *, title: str = "A chat", chat_id: str | None = None
    ) -> tuple[str, list[int]]:
        with multi_app.app_context():
            if chat_id is None:
                chat = Chat(user_id=user_id, title=title)
                db.session.add(chat)
                db.session.flush()
                chat_id = chat.id
            ids = []
            for item in messages:
                role, content, extra = (*item, {})[:3]
                message = Message(
                    chat_id=chat_id,
                    role=role,
                    content=content,
                    tool_call_id=extra.get("tool_call_id"),
                    request_id=extra.get("request_id"),
                )
                for name in ("tool_calls", "content_parts", "meta"):
                    if name in extra:
                        setattr(message, name, extra[name])
                db.session.add(message)
                db.session.flush()
                ids.append(message.id)
            db.session.commit()
            return chat_id, ids

    return build


def live_rows(app, chat_id: str) -> list[tuple]:
    """(id, role, content, tool_call_id) of the chat's shown messages (its transcript), in order."""
    from sqlalchemy import select

    from numi.extensions import db
    from numi.models import Message

    with app.app_context():
        return [
            tuple(r)
            for r in db.session.execute(
                select(Message.id, Message.role, Message.content, Message.tool_call_id)
                .where(Message.chat_id == chat_id, Message.shown())
                .order_by(Message.id)
            )
        ]


@pytest.fixture
def live(multi_app):
    return lambda chat_id: live_rows(multi_app, chat_id)
