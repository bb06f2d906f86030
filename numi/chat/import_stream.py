"""An import file turned into a stream of small records, for the writer to store batch by batch.

This runs in the import's subprocess (numi/web/import_worker.py), never on the server's hub:
it validates the whole file first (every format check of `numi.chat.importer`, the message
length limit, and the caps of one import), so a refused file changes nothing, and only then
yields records, each small enough to be decoded and written by the server between other
users' requests (issue 34: one big import used to freeze every user for minutes).

Records, in order:
- `{"kind": "chats" | "project", "chats": n, "messages": m, ...}` first (a chats record
  names the file's `format`, and the conversations left out because they cannot be read:
  `unreadable`, their count, and `unreadable_chats`, [{index, title, reason}]; a project's record
  also carries its raw fields, memories and checked files, see `project_transfer.read_project`);
- per chat, `{"chat": header}`, then `{"messages": [...]}` batches in transcript order, each
  message with `parent` (the index of its parent in the chat, or None for a first message),
  `selected` and `active` already worked out, so the writer needs no second pass;
- `{"end": true}` after the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, cast

from ..errors import NumiError
from . import importer, project_transfer
from .imported import (
    ChatImporter,
    ConversationImporter,
    ImportedChat,
    invalid_import,
    reads_conversations,
)

# A batch is written in one short transaction (a few milliseconds): another user's request
# waits for at most one of them at each of its own waits (a turn has many).
BATCH_MESSAGES = 25
BATCH_CHARS = 50_000


# The preview lists this many unreadable conversations (it counts them all).
MAX_UNREADABLE_LISTED = 100


def records(document: Any, limits: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The records of a chat export or a project export (see the module docstring).

    Raises NumiError (invalid_import, import_too_large/_deep/_wide) before the first record
    when the file is malformed or over a cap."""
    head: dict[str, Any]
    if project_transfer.is_project_document(document):
        head, chats = project_transfer.read_project(document, limits)
        head["kind"] = "project"
    else:
        reader = importer.detect_format(document)
        if reads_conversations(reader):
            items = cast(ConversationImporter, reader).items(document)
            yield from conversation_records(reader, lambda: iter(items), limits)
            return
        chats = reader.parse(document, limits)
        for chat in chats:
            chat.source = reader.name if chat.source_id else None
        if not chats:
            raise invalid_import("The file holds no chat.")
        head = {"kind": "chats", "format": reader.label, "unreadable": 0, "unreadable_chats": []}
    importer.check_sizes(chats, limits["NUMI_MAX_MESSAGE_CHARS"])
    shaped = [_shape(chat, limits) for chat in _capped(chats, limits)]
    head.update(chats=len(shaped), messages=sum(len(c.messages) for c in chats))
    yield head
    for chat, tree in zip(chats, shaped, strict=True):
        yield {"chat": _header(chat)}
        yield from _batches(chat.messages, tree)
    yield {"end": True}


def conversation_records(
    reader: ChatImporter, conversations: Callable[[], Iterator[Any]], limits: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The records of a file of conversations read one at a time, in two passes over
    `conversations()` (a fresh iterator each time, such as a big file read again): the first
    checks every conversation and the caps, keeping only counts, so a refused file still
    changes nothing; the second yields the records. A conversation that cannot be read is
    left out and listed with why (`unreadable`), unless none can be read."""
    reader = cast(ConversationImporter, reader)
    chats = messages = 0
    unreadable: list[dict[str, Any]] = []
    skipped: set[int] = set()
    for index, raw in enumerate(conversations()):
        chat = _conversation(reader, raw, index, limits, unreadable)
        if chat is None:
            skipped.add(index)
            continue
        chats, messages = chats + 1, messages + len(chat.messages)
        _check_counts(chats, messages, limits)
        _shape(chat, limits)
    if not chats:
        raise invalid_import(unreadable[0]["reason"] if unreadable else "The file holds no chat.")
    yield {
        "kind": "chats",
        "format": reader.label,
        "chats": chats,
        "messages": messages,
        "unreadable": len(unreadable),
        "unreadable_chats": unreadable[:MAX_UNREADABLE_LISTED],
    }
    for index, raw in enumerate(conversations()):
        if index in skipped:
            continue
        chat = reader.conversation(raw, index, limits)
        chat.source = reader.name if chat.source_id else None
        yield {"chat": _header(chat)}
        yield from _batches(chat.messages, _shape(chat, limits))
    yield {"end": True}


def _conversation(
    reader: ConversationImporter,
    raw: Any,
    index: int,
    limits: dict[str, Any],
    unreadable: list[dict[str, Any]],
) -> ImportedChat | None:
    """The conversation read and checked, or None when it cannot be read (noted in
    `unreadable` with its title, if it has one, and why)."""
    try:
        chat = reader.conversation(raw, index, limits)
    except NumiError as error:
        if error.code != "invalid_import":
            raise
        unreadable.append({"index": index, "title": _title_of(raw), "reason": error.message[:500]})
        return None
    importer.check_sizes([chat], limits["NUMI_MAX_MESSAGE_CHARS"])
    return chat


def _title_of(raw: Any) -> str | None:
    if isinstance(raw, dict):
        for key in ("title", "name"):
            if isinstance(raw.get(key), str) and raw[key].strip():
                return raw[key].strip()[:200]
    return None


def _check_counts(chats: int, messages: int, limits: dict[str, Any]) -> None:
    most_chats, most_messages = limits["NUMI_IMPORT_MAX_CHATS"], limits["NUMI_IMPORT_MAX_MESSAGES"]
    if chats > most_chats:
        raise _too_large(f"it holds more than {most_chats} chats, the most one import may hold")
    if messages > most_messages:
        raise _too_large(
            f"it holds more than {most_messages} messages, the most one import may hold"
        )


def _capped(chats: list[ImportedChat], limits: dict[str, Any]) -> list[ImportedChat]:
    most_chats, most_messages = limits["NUMI_IMPORT_MAX_CHATS"], limits["NUMI_IMPORT_MAX_MESSAGES"]
    if len(chats) > most_chats:
        raise _too_large(f"it holds {len(chats)} chats; one import may hold {most_chats}")
    total = sum(len(chat.messages) for chat in chats)
    if total > most_messages:
        raise _too_large(f"it holds {total} messages; one import may hold {most_messages}")
    return chats


def _too_large(reason: str) -> NumiError:
    return NumiError("import_too_large", f"This file is too large to import: {reason}.")


class _Tree:
    """Where each message of a chat hangs: parent index, selected and active flags."""

    def __init__(self, parents: list[int | None], selected: list[bool], active: list[bool]):
        self.parents, self.selected, self.active = parents, selected, active


def _shape(chat: ImportedChat, limits: dict[str, Any]) -> _Tree:
    """The chat's tree as the writer stores it, refused when deeper or wider than the caps.

    A message with `parent` hangs below the message of that key (a first message when the
    key is None or unknown); one without follows the message before it. Exactly one version
    per parent is selected (the last the file selects, else the newest)."""
    most_deep, most_wide = limits["NUMI_IMPORT_MAX_DEPTH"], limits["NUMI_IMPORT_MAX_WIDTH"]
    by_key: dict[Any, int] = {}
    parents: list[int | None] = []
    depth: list[int] = []
    children: dict[int | None, list[int]] = {}
    for index, fields in enumerate(chat.messages):
        if "parent" in fields:
            parent = by_key.get(fields["parent"]) if fields["parent"] is not None else None
        else:
            parent = index - 1 if index else None
        if fields.get("key") is not None:
            by_key[fields["key"]] = index
        parents.append(parent)
        depth.append(1 if parent is None else depth[parent] + 1)
        if depth[-1] > most_deep:
            raise NumiError(
                "import_too_deep",
                f"{chat.title[:80]!r} has a chain of more than {most_deep} messages, each the "
                "reply to the one before; this server imports chains up to that length.",
            )
        siblings = children.setdefault(parent, [])
        siblings.append(index)
        if len(siblings) > most_wide:
            raise NumiError(
                "import_too_wide",
                f"{chat.title[:80]!r} has a message with more than {most_wide} versions "
                "(replies to the same message); this server imports up to that many.",
            )
    selected = [False] * len(parents)
    for group in children.values():
        chosen = [i for i in group if chat.messages[i].get("selected", True)]
        selected[chosen[-1] if chosen else group[-1]] = True
    # A parent always comes before its children, so its flag is known when a child is reached.
    active: list[bool] = []
    for index, parent in enumerate(parents):
        active.append(selected[index] and (parent is None or active[parent]))
    return _Tree(parents, selected, active)


def _header(chat: ImportedChat) -> dict[str, Any]:
    given = [m["created_at"] for m in chat.messages if m["created_at"] is not None]
    # The chat was last active when its last message was written, not when it was imported:
    # the sidebar then files it under its own date.
    last = max(given) if given else chat.created_at
    return {
        "title": chat.title,
        "model": chat.model,
        "endpoint": chat.endpoint,
        "settings": chat.settings,
        "created_at": _iso(chat.created_at),
        "updated_at": _iso(last),
        "messages": len(chat.messages),
        "source": chat.source,
        "source_id": chat.source_id[:200] if chat.source_id else None,
    }


def _batches(messages: list[dict[str, Any]], tree: _Tree) -> Iterator[dict[str, Any]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for index, fields in enumerate(messages):
        message = {k: v for k, v in fields.items() if k not in ("key", "parent", "selected")}
        message.update(
            created_at=_iso(fields["created_at"]),
            parent=tree.parents[index],
            selected=tree.selected[index],
            active=tree.active[index],
        )
        batch.append(message)
        size += len(message["content"] or "") + len(message["reasoning_content"] or "")
        if len(batch) >= BATCH_MESSAGES or size >= BATCH_CHARS:
            yield {"messages": batch}
            batch, size = [], 0
    if batch:
        yield {"messages": batch}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
