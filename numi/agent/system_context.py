"""What a request carries before its messages: the system context, as named parts.

The model sees the parts joined by blank lines as one system prompt; the context panel
lists them one by one with their tokens. Every path that builds a request or describes
one (the turn, `/context`, `context_info`) takes the parts from `system_parts`, so what
the panel shows is what the model gets. Kinds, in the order the model reads them:

- `system_prompt`: the chat's own system prompt (absent when empty);
- `project_instructions`: the instructions of the chat's project;
- `memories`: the user's memories (and the project's), when memory is on and the chat is
  not temporary (a temporary chat uses no memory, as ChatGPT's do);
- `documents`: passages of the chat's documents for its newest question, numbered for
  citing, when its "Use documents" is automatic (numi/knowledge/retrieval.py);
- `clock`: the user's current date (always last, always present).

The clock says the date, not the time: the system prompt opens every request, and a
line that changed each minute made every server's prompt cache (llama-server's slot,
vLLM's and OpenAI's prefix caches, Anthropic's breakpoints) read the whole conversation
again once the minute turned (issue 44: 63 s for one turn of a CPU model). The date
changes once a day; the `current_time` tool gives the time to a model that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, select

from ..chat import memories as memory_store
from ..extensions import db
from ..knowledge import retrieval
from ..models import Chat, Project, User

_users, _chats, _projects = User.__table__.c, Chat.__table__.c, Project.__table__.c
# One query for whether the user keeps memories, whether the chat is temporary and its
# project (scoped to the owner: a stale id reads as none), built once: every model request
# reads it.
_USER_AND_PROJECT = (
    select(
        _users.memory_enabled,
        _chats.temporary,
        _projects.id,
        _projects.name,
        _projects.instructions,
    )
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
    # The pieces the panel lists one by one (a `documents` part's passages, as dicts).
    items: tuple[dict[str, Any], ...] = ()


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
    if found is not None and found.memory_enabled and not found.temporary:
        kept = memory_store.memories_for_chat(user_id, project.id if project else None)
        if kept:
            parts.append(
                SystemPart("memories", memory_store.system_text(kept, project and project.name))
            )
    # Without a project (read above, scoped the same way) retrieval need not look again;
    # with one it reads the whole row (its settings).
    known = {} if project is not None else {"project": None}
    passages = retrieval.chat_passages(user_id, chat_id, settings, **known)
    if passages is not None:
        items = tuple(
            {**p.to_dict(), "source": p.source, "reason": p.reason, "key": p.key}
            for p in passages.passages
        )
        parts.append(SystemPart("documents", retrieval.system_text(passages), items))
    parts.append(
        SystemPart(
            "clock",
            f"Current date for the user: {now.strftime('%A, %Y-%m-%d')} ({now.tzinfo}).",
        )
    )
    return parts


def system_text(parts: list[SystemPart]) -> str:
    """The one system prompt a provider is sent."""
    return "\n\n".join(part.text for part in parts)
