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
