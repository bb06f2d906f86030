"""What a request carries before its messages: the system context, as named parts.

The model sees the parts joined by blank lines as one system prompt; the context panel
lists them one by one with their tokens. Every path that builds a request or describes
one (the turn, `/context`, `context_info`) takes the parts from `system_parts`, so what
the panel shows is what the model gets. Kinds, in the order the model reads them:

- `system_prompt`: the chat's own system prompt (absent when empty);
- `project_instructions`: the instructions of the chat's project;
- `memories`: the user's memories (and the project's), when memory is on;
- `clock`: the user's current date and time (always last, always present).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, select

from ..chat import memories as memory_store
from ..extensions import db
from ..models import Chat, Project, User

_users, _chats, _projects = User.__table__.c, Chat.__table__.c, Project.__table__.c
# One query for whether the user keeps memories and the chat's project (scoped to the
# owner: a stale id reads as none), built once: every model request reads it.
_USER_AND_PROJECT = (
    select(_users.memory_enabled, _projects.id, _projects.name, _projects.instructions)
    .select_from(
        User.__table__.outerjoin(
            Chat.__table__, and_(_chats.id == bindparam("chat_id"), _chats.user_id == _users.id)
        ).outerjoin(
            Project.__table__,
            and_(_projects.id == _chats.project_id, _projects.user_id == _users.id),
        )
    )
    .where(_users.id == bindparam("user_id"))
)


@dataclass(frozen=True)
class SystemPart:
    kind: str
    text: str


def system_parts(
    *, user_id: int, chat_id: str, settings: dict[str, Any], now: datetime
) -> list[SystemPart]:
    """The system context of a request in `chat_id` of `user_id`, part by part."""
    parts: list[SystemPart] = []
    prompt = (settings.get("system_prompt") or "").strip()
    if prompt:
        parts.append(SystemPart("system_prompt", prompt))
    found = db.session.execute(_USER_AND_PROJECT, {"chat_id": chat_id, "user_id": user_id}).first()
    project = found if found is not None and found.id is not None else None
    if project is not None and (project.instructions or "").strip():
        parts.append(
            SystemPart(
                "project_instructions",
                f"Instructions of the project {project.name!r}, which this chat belongs to:\n\n"
                + project.instructions.strip(),
            )
        )
    if found is not None and found.memory_enabled:
        kept = memory_store.memories_for_chat(user_id, project.id if project else None)
        if kept:
            parts.append(
                SystemPart("memories", memory_store.system_text(kept, project and project.name))
            )
    parts.append(
        SystemPart(
            "clock",
            f"Current date and time for the user: {now.strftime('%A, %Y-%m-%d %H:%M')} ({now.tzinfo}).",
        )
    )
    return parts


def system_text(parts: list[SystemPart]) -> str:
    """The one system prompt a provider is sent."""
    return "\n\n".join(part.text for part in parts)
