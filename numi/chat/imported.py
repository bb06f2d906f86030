"""The neutral imported-chat model every import format produces, and the import error.

A leaf module: the format readers (`numi.chat.import_formats`) and the writer that stores
what they read (`numi.chat.importer`) both import it, and it imports nothing of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..errors import NumiError


def invalid_import(message: str) -> NumiError:
    """The error for a malformed import file: code `invalid_import`, status 400, nothing written."""
    return NumiError("invalid_import", message, 400)


@dataclass
class ImportedChat:
    """A chat read from a file, validated, not yet stored."""

    title: str
    model: str | None = None
    endpoint: dict[str, Any] | None = None  # {"id", "name"} as the file knew it: a hint only
    settings: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    # The app it came from and its id there: a second import of the same chat adds nothing.
    source: str | None = None
    source_id: str | None = None


class ChatImporter(Protocol):
    """One file format. `parse` validates everything and raises `invalid_import` on the first problem."""

    name: str
    label: str  # how the refusal of an unknown file names the format

    def detect(self, document: Any) -> bool: ...

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]: ...


class ConversationImporter(ChatImporter, Protocol):
    """A format whose file is a list of conversations, each read on its own: one that cannot
    be read is left out and listed with why (the preview's "3 unreadable"), and a big file
    is read one conversation at a time, never whole (numi/chat/import_stream.py)."""

    def items(self, document: Any) -> list[Any]: ...

    def conversation(self, raw: Any, index: int, limits: dict[str, Any]) -> ImportedChat: ...


def reads_conversations(importer: ChatImporter) -> bool:
    """Whether `importer` reads its file conversation by conversation."""
    return callable(getattr(importer, "conversation", None))
