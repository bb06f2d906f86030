"""Memories: short facts a user keeps, carried by every request while memory is on.

Memory is opt-in (`users.memory_enabled`, off until the user turns it on). A memory is the
user's own (`project_id` NULL: every chat) or a project's (the chats of that project). The
model can propose one through the `remember` tool, which always asks: nothing is written
without the user's yes. Every function takes the owner's user id; a foreign memory or
project is a 404. Bad input fails with a stable code and writes nothing:

- `invalid_memory`: empty, or over `NUMI_MAX_MEMORY_CHARS`;
- `too_many_memories`: the user keeps `NUMI_MAX_MEMORIES` already;
- `duplicate_memory`: the same text is kept already for the same scope (the user's own,
  or that project's), so a fact is never carried twice by every request;
- `unknown_project`: a `project_id` that is not one of the user's projects.

Export and import use a small document of their own, `numi.memories` version 1 (as saved
prompts do): importing skips a memory identical to one already kept, so a second import of
the same file changes nothing. Project memories travel with their project's export.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select

from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import Memory, User, get_owned
from .chats import project_ref

FORMAT_TAG = "numi.memories"
FORMAT_VERSION = 1


def memory_enabled(user_id: int) -> bool:
    """Whether the user has turned memory on."""
    return bool(db.session.execute(select(User.memory_enabled).where(User.id == user_id)).scalar())


def set_memory_enabled(user_id: int, on: bool) -> None:
    user = db.session.get(User, user_id)
    if user is None:
        raise NotFound("user")
    user.memory_enabled = bool(on)
    db.session.commit()


def list_memories(
    user_id: int, *, project_id: int | None = None, every: bool = False
) -> list[Memory]:
    """The user's own memories (`project_id` None), a project's, or `every` one, oldest first."""
    stmt = select(Memory).where(Memory.user_id == user_id)
    if not every:
        stmt = stmt.where(
            Memory.project_id.is_(None) if project_id is None else Memory.project_id == project_id
        )
    return list(db.session.execute(stmt.order_by(Memory.id)).scalars())


def memories_for_chat(user_id: int, project_id: int | None) -> list[Memory]:
    """What a request of a chat carries: the user's memories, then its project's."""
    scope = Memory.project_id.is_(None)
    if project_id is not None:
        scope = or_(scope, Memory.project_id == project_id)
    rows = db.session.execute(
        select(Memory).where(Memory.user_id == user_id, scope).order_by(Memory.id)
    ).scalars()
    return sorted(rows, key=lambda m: (m.project_id is not None, m.id))


def get_memory(user_id: int, memory_id: int) -> Memory:
    """The user's memory `memory_id`, or NotFound."""
    return get_owned(Memory, memory_id, user_id, "memory")


def clean_text(value: Any, limits: dict[str, Any]) -> str:
    """A memory's text: one short fact, 1 to NUMI_MAX_MEMORY_CHARS characters."""
    limit = limits["NUMI_MAX_MEMORY_CHARS"]
    text = value.strip() if isinstance(value, str) else ""
    if not text or len(text) > limit:
        raise invalid(f"A memory is 1 to {limit} characters of text.", "invalid_memory")
    return text


def create_memory(
    user_id: int, text: Any, project_id: Any, limits: dict[str, Any], *, commit: bool = True
) -> Memory:
    """Keep a new memory (the user's own, or the project's with `project_id`)."""
    clean = clean_text(text, limits)
    project = project_ref(user_id, project_id)
    _check_new(user_id, project, clean)
    _check_room(user_id, limits)
    memory = Memory(user_id=user_id, project_id=project, text=clean)
    db.session.add(memory)
    if commit:
        db.session.commit()
    return memory


def update_memory(
    user_id: int, memory_id: int, fields: dict[str, Any], limits: dict[str, Any]
) -> Memory:
    memory = get_memory(user_id, memory_id)
    updates: dict[str, Any] = {}
    if "text" in fields:
        updates["text"] = clean_text(fields["text"], limits)
    if "project_id" in fields:
        updates["project_id"] = project_ref(user_id, fields["project_id"])
    if updates:
        _check_new(
            user_id,
            updates.get("project_id", memory.project_id),
            updates.get("text", memory.text),
            memory.id,
        )
    for name, value in updates.items():
        setattr(memory, name, value)
    db.session.commit()
    return memory


def delete_memory(user_id: int, memory_id: int) -> None:
    db.session.delete(get_memory(user_id, memory_id))
    db.session.commit()


def _check_new(user_id: int, project_id: int | None, text: str, own_id: int | None = None) -> None:
    """Refuse a text the user keeps already in that scope (`own_id`: the memory being
    edited, which may keep its own text)."""
    same = select(Memory.id).where(
        Memory.user_id == user_id,
        Memory.project_id.is_(None) if project_id is None else Memory.project_id == project_id,
        Memory.text == text,
    )
    if own_id is not None:
        same = same.where(Memory.id != own_id)
    if db.session.execute(same.limit(1)).first() is not None:
        raise NumiError("duplicate_memory", "You keep this memory already.", 409)


def _check_room(user_id: int, limits: dict[str, Any], adding: int = 1) -> None:
    count = db.session.execute(
        select(func.count()).select_from(Memory).where(Memory.user_id == user_id)
    ).scalar_one()
    if count + adding > limits["NUMI_MAX_MEMORIES"]:
        raise NumiError(
            "too_many_memories",
            f"You keep {count} memories; the most is {limits['NUMI_MAX_MEMORIES']}. "
            "Delete some first.",
            400,
        )


def system_text(memories: list[Memory], project_name: str | None) -> str:
    """The `memories` part of the system context."""
    own = [m.text for m in memories if m.project_id is None]
    shared = [m.text for m in memories if m.project_id is not None]
    lines = ["What the user asked you to remember (use it when it helps; do not recite it):"]
    lines += [f"- {text}" for text in own]
    if shared:
        lines.append(f"Remembered for the project {project_name!r}:" if project_name else "")
        lines += [f"- {text}" for text in shared]
    return "\n".join(line for line in lines if line)


# --- export and import ---------------------------------------------------------------------


def export_document(user_id: int) -> dict[str, Any]:
    """The user's own memories, as a `numi.memories` document (the switch is recorded, but
    an import never turns memory on: that stays the user's own choice)."""
    return {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "memory_enabled": memory_enabled(user_id),
        "memories": [{"text": m.text} for m in list_memories(user_id)],
    }


def is_memories_document(document: Any) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT_TAG


def import_memories(
    user_id: int, document: Any, limits: dict[str, Any], *, project_id: int | None = None
) -> dict[str, Any]:
    """Add the document's memories (all checked first; identical ones skipped)."""
    if document.get("version") != FORMAT_VERSION or not isinstance(document.get("memories"), list):
        raise invalid(
            f"This memories file is not {FORMAT_TAG} version {FORMAT_VERSION}.", "invalid_import"
        )
    texts = []
    for index, item in enumerate(document["memories"]):
        if not isinstance(item, dict):
            raise invalid(f"memories[{index}] is not an object.", "invalid_import")
        try:
            texts.append(clean_text(item.get("text"), limits))
        except NumiError as error:
            raise invalid(f"memories[{index}]: {error.message}", "invalid_import") from None
    kept = {m.text for m in list_memories(user_id, project_id=project_id)}
    new = list(dict.fromkeys(t for t in texts if t not in kept))
    _check_room(user_id, limits, len(new))
    created = [Memory(user_id=user_id, project_id=project_id, text=t) for t in new]
    db.session.add_all(created)
    db.session.commit()
    return {"created": created, "skipped": len(texts) - len(new)}
