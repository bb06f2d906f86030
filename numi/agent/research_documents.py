"""A research run's second source: the chat's documents (its project's files and its own
attachments), searched for each sub-question beside the web.

The search is numi/knowledge's `retrieve` on `chat_documents`, the one way `search_documents`
and the system context find passages too: scoped to the run's owner, words and meaning fused.
A chat (or its project) whose "Use documents" is `never` is not searched. Each passage found
is kept as one of the run's sources under a stable address, `document:<attachment>:<chunk>`,
so a passage two sub-questions find is kept once and a resumed run keeps it without
searching again; its citation carries the attachment and chunk, as `search_documents`'s
do, so the report's chip opens the passage in the side panel.
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from ..knowledge import retrieval
from ..knowledge.index import ensure_indexed

PASSAGES_PER_QUESTION = 3
PREFIX = "document:"


def chat_documents(user_id: int, chat_id: str, settings: dict[str, Any]) -> list[int]:
    """The documents a run of this chat searches: none when "Use documents" is never."""
    project = retrieval.chat_project(user_id, chat_id)
    if retrieval.use_documents(settings, project) == "never":
        return []
    return retrieval.chat_documents(user_id, chat_id, project)


def search(user_id: int, question: str, documents: list[int]) -> tuple[list[Any], str]:
    """The best passages of `documents` for `question`, and the step's line."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    busy = ensure_indexed(app, user_id, documents)  # one still indexing joins a later search
    found = retrieval.retrieve(
        user_id, question[:2000], limit=PASSAGES_PER_QUESTION, attachment_ids=documents
    )
    count = len(found.passages)
    note = f"Searched your documents for “{question}”: {count} passage{'s' if count != 1 else ''}."
    if busy:
        note += f" ({busy} still being indexed.)"
    return found.passages, note


def address(passage: Any) -> str:
    return f"{PREFIX}{passage.document_id}:{passage.chunk}"


def cited(url: str) -> dict[str, Any] | None:
    """A document source's citation fields (no URL; its attachment and chunk), or None for
    a web page."""
    if not url.startswith(PREFIX):
        return None
    attachment, _, chunk = url[len(PREFIX) :].partition(":")
    return {"url": None, "attachment_id": int(attachment), "chunk": int(chunk), "kind": "document"}
