"""Passages as the user meets them: an answer's numbered sources, each opening at its
passage, and the passages a chat leaves out of its next request.

- `answer_sources`: the system context's passages ([1]..[n], numbered as the model read
  them) as the sources the answer is saved with (`Message.citation_sources`); the tools'
  sources number on after them (agent/tool_runner.py), so a marker names one passage
  whichever way it was found.
- `passage_view`: one passage of the user's document with the text around it, for the
  side panel a citation opens (document name, page or heading, the passage marked).
- `left_out_passages` and `with_left_out`: what the context panel lists as left out, and
  the chat's `left_out_passages` setting with one passage left out or brought back.

Every query is scoped to the owner: another user's document is no passage (NotFound).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select, text

from ..errors import NotFound
from ..extensions import db
from ..models import Attachment
from .index import chunk_rows, of_document
from .retrieval import Passage, left_out_keys, passage_key

AROUND_CHARS = 600  # of each neighbouring chunk shown before and after a passage


def answer_sources(items: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[dict]:
    """The documents part's passages (`Passage.to_dict()` plus `source`) as numbered
    citation sources: `attachment_id` and `chunk` (from 0) say which passage opens."""
    return [
        {
            "n": n,
            "title": str(item.get("source") or item.get("name") or "Document")[:300],
            "url": None,
            "attachment_id": int(item["document_id"]),
            "chunk": int(item["chunk"]) - 1,  # to_dict() counts chunks from 1
        }
        for n, item in enumerate(items, 1)
    ]


def document_source(sources: list[Any] | None, number: int) -> dict[str, Any]:
    """Source `number` of an answer when it is a passage of a document, else NotFound."""
    for index, source in enumerate(sources or (), 1):
        if isinstance(source, dict) and (source.get("n") or index) == number:
            attachment_id, chunk = source.get("attachment_id"), source.get("chunk")
            if isinstance(attachment_id, int) and isinstance(chunk, int):
                return source
    raise NotFound("passage")


def passage_view(user_id: int, attachment_id: int, chunk: int) -> dict[str, Any]:
    """The passage (document name, where, its text) and the end of the chunk before it and
    the start of the chunk after it; NotFound for a deleted or another user's document."""
    rows = chunk_rows(user_id, [(attachment_id, chunk)])
    found = rows.get((attachment_id, chunk))
    if found is None:
        raise NotFound("passage")
    params: dict[str, Any] = {"u": user_id, "before": chunk - 1, "after": chunk + 1}
    document = of_document("f", params, attachment_id)
    around = dict(
        db.session.execute(
            text(
                "SELECT f.chunk, f.content FROM fts_document_chunks f "
                "JOIN attachments a ON a.id = f.attachment_id "
                f"WHERE {document} AND f.user_id = :u AND a.user_id = :u "
                "AND f.chunk IN (:before, :after)"
            ),
            params,
        ).all()
    )
    passage = _passage(attachment_id, chunk, found)
    before, after = around.get(chunk - 1) or "", around.get(chunk + 1) or ""
    mime = db.session.execute(
        select(Attachment.mime).where(Attachment.id == attachment_id, Attachment.user_id == user_id)
    ).scalar()
    return {
        "document_id": attachment_id,
        "pdf": mime == "application/pdf",  # the panel links the file itself, at the page
        "name": found["name"],
        "source": passage.source,
        "where": found["where"],
        "text": re.sub(r"\n\s*\n", "\n", found["text"]).strip(),  # one mark, no empty lines
        "before": ("…" + before[-AROUND_CHARS:]) if len(before) > AROUND_CHARS else before,
        "after": (after[:AROUND_CHARS] + "…") if len(after) > AROUND_CHARS else after,
    }


def _passage(attachment_id: int, chunk: int, row: dict[str, Any]) -> Passage:
    return Passage(attachment_id, chunk, row["name"], row["text"], 0.0, [], row["where"])


def left_out_passages(user_id: int, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The passages the chat leaves out, with their source, in the order they were left
    out; a passage whose document is gone is not listed (nor carried anyway)."""
    keys = []
    for key in sorted(left_out_keys(settings), key=_order(settings)):
        document, chunk = key.split(":")
        keys.append((int(document), int(chunk)))
    rows = chunk_rows(user_id, keys)
    return [
        {
            "key": passage_key(*key),
            "source": _passage(key[0], key[1], rows[key]).source,
            "text": rows[key]["text"],
        }
        for key in keys
        if key in rows
    ]


def _order(settings: dict[str, Any]):
    listed = list(settings.get("left_out_passages") or ())
    return lambda key: listed.index(key) if key in listed else len(listed)


def with_left_out(settings: dict[str, Any], key: str, left_out: bool) -> list[str]:
    """The chat's `left_out_passages` with `key` left out (or brought back)."""
    kept = [k for k in settings.get("left_out_passages") or () if k != key]
    return kept + [key] if left_out else kept
