"""What the foreign importers share: checked reads of untrusted JSON, times, messages, trees.

A reader never trusts the file: a field of the wrong type is an `invalid_import` naming
where it is, a time is seconds, milliseconds or ISO text, and text that will be shown is
kept as text (the page escapes and sanitises it like any message; nothing here is HTML).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ..import_formats import (
    _branch,
    _epoch,
    _fenced,
    _message,
    _reference,
    _title,
    _tree,
    _versions,
)
from ..imported import ImportedChat, invalid_import

__all__ = [
    "ImportedChat",
    "chat_of",
    "fenced",
    "invalid_import",
    "listed",
    "message",
    "obj",
    "reference",
    "split_think",
    "text",
    "time_of",
    "tool_call",
    "tool_output",
    "tree",
]

fenced = _fenced
reference = _reference
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


def obj(value: Any, where: str) -> dict[str, Any]:
    """`value` when it is an object, else the import's error naming `where`."""
    if not isinstance(value, dict):
        raise invalid_import(f"{where} must be an object.")
    return value


def listed(value: Any, where: str, *, optional: bool = True) -> list[Any]:
    """`value` when it is a list (None is an empty list when `optional`)."""
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise invalid_import(f"{where} must be a list.")
    return value


def text(value: Any) -> str:
    """Text, or "" for anything else (apps leave nulls and numbers where text may be)."""
    return value if isinstance(value, str) else ""


def time_of(value: Any, where: str) -> datetime | None:
    """Naive UTC from epoch seconds, epoch milliseconds or ISO 8601 text; None for none."""
    if isinstance(value, str) and value:
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise invalid_import(f"{where} is not a date and time.") from None
        return stamp if stamp.tzinfo is None else stamp.astimezone(UTC).replace(tzinfo=None)
    return _epoch(value if value != "" else None, where)


def split_think(content: str) -> tuple[str, str]:
    """(reasoning, answer) of a text that opens with `<think>…</think>`, as local models
    and the apps that keep their raw output write it."""
    found = _THINK.match(content)
    if not found:
        return "", content
    return found.group(1).strip(), content[found.end() :]


def message(
    source: str,
    role: str,
    content: str,
    *,
    reasoning: str | None = None,
    created_at: datetime | None = None,
    model: str | None = None,
) -> dict[str, Any] | None:
    """A neutral message of `source`'s file, or None when it carries nothing to show."""
    if not content.strip() and not (reasoning or "").strip():
        return None
    meta: dict[str, Any] = {"imported_from": source}
    if model:
        meta["model"] = model[:200]
    return _message(role, content, reasoning=reasoning or None, created_at=created_at, meta=meta)


def tool_call(name: str, arguments: Any) -> str:
    """A tool call as readable text: the exports keep calls without results Numi could pair."""
    body = arguments if isinstance(arguments, str) else json.dumps(arguments, indent=2)
    return f"**Tool call ({name[:100] or 'tool'})**\n\n{fenced(body, 'json')}"


def tool_output(name: str, output: Any) -> str:
    body = output if isinstance(output, str) else json.dumps(output, indent=2)
    return f"**Tool output ({name[:100] or 'tool'})**\n\n{fenced(body)}"


def chat_of(
    title: Any,
    where: str,
    limits: dict[str, Any],
    *,
    model: Any = None,
    created_at: datetime | None = None,
    system_prompt: Any = None,
    source_id: Any = None,
) -> ImportedChat:
    """A new chat with a checked title, its model and, when the file has one, its system
    prompt as the chat's prompt (cut to the limit a typed prompt has); `source_id` is the
    chat's id in the app's file, which makes a second import of it add nothing."""
    chat = ImportedChat(
        title=_title(title if isinstance(title, str) else None, f"{where}.title", limits),
        model=model[:200] if isinstance(model, str) and model else None,
        created_at=created_at,
        source_id=str(source_id) if isinstance(source_id, str | int) and source_id != "" else None,
    )
    prompt = text(system_prompt).strip()
    if prompt:
        chat.settings["system_prompt"] = prompt[: limits["NUMI_MAX_SYSTEM_PROMPT_CHARS"]]
    return chat


def tree(
    chat: ImportedChat,
    nodes: dict[str, dict[str, Any]],
    convert: Callable[[str], dict[str, Any] | None],
    where: str,
    current: str | None = None,
) -> None:
    """Add `nodes` ({id: {"parent": id or None, "order": sortable}}) to `chat` as versions.

    The shown branch ends at `current`, else at the newest leaf (the file's order breaks
    ties): what the apps without a pointer show. A parent the file does not hold makes
    its child a first message."""
    for node in nodes.values():
        if node["parent"] not in nodes:
            node["parent"] = None
    if current not in nodes:
        parents = {n["parent"] for n in nodes.values()}
        leaves = [k for k in nodes if k not in parents]
        current = max(leaves, key=lambda k: nodes[k]["order"], default=None)
    if current is None:
        return
    path = _branch(nodes, current, "parent", where)
    _versions(chat, _tree(nodes, "parent", lambda n: n["order"]), path, convert)


def order_key(stamp: datetime | None, index: int) -> tuple[float, int]:
    """A node's place among its siblings: its time, then its place in the file."""
    return (stamp.timestamp() if stamp else 0.0, index)


def joined(parts: Iterable[str]) -> str:
    return "\n\n".join(p for p in parts if p and p.strip())
