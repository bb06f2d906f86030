"""Document search (`use_rag`): the user's uploaded documents, chunked and full-text indexed.

- Chunking: paragraphs packed into chunks of about CHUNK_CHARS characters; a paragraph
  longer than that is cut at word boundaries; each chunk starts with the last
  OVERLAP_CHARS of the previous one, so a passage cut in two is still found whole.
- Index: the table fts_document_chunks (created by the migration by hand):
  SQLite FTS5 ranked with bm25() (porter stemming; the title counts double), PostgreSQL
  to_tsvector('english') with a GIN index ranked with ts_rank_cd, and elsewhere (SQLite
  without FTS5) a plain table searched with LIKE, ranked by the number of query words found.
- Indexing state per document is a DocumentIndex row (pending → indexing → done | error,
  with chunks / chunks_total as progress). Indexing runs in a background greenlet that
  commits one small batch at a time and yields to the hub between batches, so turns and
  requests go on meanwhile; `schedule_indexing(app, attachment_id)` starts it (the upload
  code calls it), and a search starts it for any of the user's documents not indexed yet.
- The tool `search_documents` returns the best passages with their source (document name
  and chunk number) as citation sources. Every query is scoped to the calling user; with the
  chat setting `rag_scope: "chat"` only the documents attached in that chat are searched.

The chat setting `use_rag` is this tool being on (`"search_documents"` in settings["tools"]).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import gevent
from flask import current_app
from sqlalchemy import select, text

from ...extensions import db
from ...models import Attachment, Chat, DocumentIndex, Message, utcnow
from . import Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)

CHUNK_CHARS = 1200
OVERLAP_CHARS = 200
BATCH_CHUNKS = 32  # chunks written per transaction; the hub gets a turn after each batch
MAX_QUERY_WORDS = 32
DEFAULT_RESULTS = 5
MAX_RESULTS = 10
JOBS_KEY = "numi.document_jobs"
NAME = "search_documents"


# --- chunking ------------------------------------------------------------------------------


def chunk_text(value: str, *, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Split a document into overlapping chunks of about `size` characters along paragraphs."""
    pieces: list[str] = []
    for index, paragraph in enumerate(re.split(r"\n\s*\n", value or "")):
        if index % 256 == 255:
            gevent.sleep(0)  # a huge document is many paragraphs: let the hub breathe
        paragraph = " ".join(paragraph.split())
        while len(paragraph) > size:  # a paragraph longer than a chunk: cut at a space
            cut = paragraph.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            pieces.append(paragraph[:cut])
            paragraph = paragraph[cut:].lstrip()
        if paragraph:
            pieces.append(paragraph)
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > size:
            chunks.append(current)
            tail = current[-overlap:] if overlap else ""
            space = tail.find(" ")
            current = (tail[space + 1 :] if space >= 0 else tail) if overlap else ""
            current = f"{current} … {piece}" if current else piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


# --- the index backend ---------------------------------------------------------------------


def backend() -> str:
    """'fts5', 'postgres' or 'like' — how fts_document_chunks was created on this database."""
    engine = db.engine
    cache = current_app.extensions.setdefault("numi.document_backend", {})
    key = str(engine.url)
    if key not in cache:
        if engine.dialect.name == "postgresql":
            cache[key] = "postgres"
        else:
            sql = (
                db.session.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'fts_document_chunks'")
                ).scalar()
                if engine.dialect.name == "sqlite"
                else None
            )
            cache[key] = "fts5" if sql and "fts5" in sql.lower() else "like"
    return cache[key]


def _query_words(query: str) -> list[str]:
    words = [w for w in re.findall(r"\w+", (query or "").lower()) if len(w) > 1 or w.isdigit()]
    return list(dict.fromkeys(words))[:MAX_QUERY_WORDS]


def search(
    user_id: int,
    query: str,
    *,
    limit: int = DEFAULT_RESULTS,
    attachment_ids: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The best passages of this user's indexed documents for `query`, best first."""
    words = _query_words(query)
    if not words or attachment_ids == []:
        return []
    params: dict[str, Any] = {"uid": user_id, "k": max(1, min(int(limit), MAX_RESULTS))}
    scope = ""
    if attachment_ids is not None:
        names = []
        for i, attachment_id in enumerate(attachment_ids[:200]):
            params[f"a{i}"] = int(attachment_id)
            names.append(f":a{i}")
        scope = f" AND f.attachment_id IN ({', '.join(names)})"
    kind = backend()
    if kind == "fts5":
        # Every word quoted (no FTS5 syntax from the user gets through), any word may match;
        # bm25() is smaller for better matches.
        params["q"] = " OR ".join(f'"{w}"' for w in words)
        sql = (
            "SELECT f.attachment_id, f.chunk, f.title, f.content, bm25(fts_document_chunks, 2.0, 1.0) AS score "
            "FROM fts_document_chunks f JOIN attachments a ON a.id = f.attachment_id "
            f"WHERE fts_document_chunks MATCH :q AND f.user_id = :uid AND a.user_id = :uid{scope} "
            "ORDER BY score LIMIT :k"
        )
    elif kind == "postgres":
        params["q"] = " | ".join(words)
        sql = (
            "SELECT f.attachment_id, f.chunk, f.title, f.content, "
            "ts_rank_cd(to_tsvector('english', f.title || ' ' || f.content), to_tsquery('english', :q)) AS score "
            "FROM fts_document_chunks f JOIN attachments a ON a.id = f.attachment_id "
            "WHERE to_tsvector('english', f.title || ' ' || f.content) @@ to_tsquery('english', :q) "
            f"AND f.user_id = :uid AND a.user_id = :uid{scope} ORDER BY score DESC LIMIT :k"
        )
    else:
        # The documented fallback: LIKE, ranked by how many query words a chunk contains.
        terms = []
        for i, word in enumerate(words[:8]):
            params[f"w{i}"] = f"%{word}%"
            terms.append(
                f"(CASE WHEN lower(f.content) LIKE :w{i} OR lower(f.title) LIKE :w{i} THEN 1 ELSE 0 END)"
            )
        score = " + ".join(terms)
        sql = (
            f"SELECT f.attachment_id, f.chunk, f.title, f.content, ({score}) AS score "
            "FROM fts_document_chunks f JOIN attachments a ON a.id = f.attachment_id "
            f"WHERE f.user_id = :uid AND a.user_id = :uid{scope} AND ({score}) > 0 "
            "ORDER BY score DESC, f.attachment_id, f.chunk LIMIT :k"
        )
    rows = db.session.execute(text(sql), params).all()
    return [
        {
            "attachment_id": int(r[0]),
            "chunk": int(r[1]),
            "title": r[2],
            "content": r[3],
            "score": float(r[4]),
        }
        for r in rows
    ]


# --- indexing ------------------------------------------------------------------------------


def schedule_indexing(app, attachment_id: int) -> bool:
    """Index one document in the background (no-op while it is being indexed already).

    Returns whether a new indexing job started. Never blocks: the work runs in a greenlet.
    """
    jobs: dict[int, gevent.Greenlet] = app.extensions.setdefault(JOBS_KEY, {})
    running = jobs.get(attachment_id)
    if running is not None and not running.dead:
        return False
    jobs[attachment_id] = gevent.spawn(_index_job, app, attachment_id)
    return True


def wait_for_indexing(app, timeout: float | None = None) -> None:
    """Wait for the running indexing jobs (for the CLI and tests)."""
    gevent.joinall(list(app.extensions.get(JOBS_KEY, {}).values()), timeout=timeout)


def _index_job(app, attachment_id: int) -> None:
    with app.app_context():
        try:
            _index(attachment_id)
        except Exception as exc:  # the state says what went wrong; the server goes on
            log.exception("indexing document %s failed", attachment_id)
            db.session.rollback()
            state = db.session.get(DocumentIndex, attachment_id)
            if state is not None:
                state.status, state.error, state.updated_at = (
                    "error",
                    f"{type(exc).__name__}: {exc}"[:500],
                    utcnow(),
                )
                db.session.commit()
        finally:
            db.session.remove()
            jobs = app.extensions.get(JOBS_KEY, {})
            if jobs.get(attachment_id) is gevent.getcurrent():
                jobs.pop(attachment_id, None)


def _index(attachment_id: int) -> None:
    attachment = db.session.get(Attachment, attachment_id)
    if attachment is None:
        return
    user_id, title, body = attachment.user_id, attachment.filename, attachment.extracted_text or ""
    state = db.session.get(DocumentIndex, attachment_id) or DocumentIndex(
        attachment_id=attachment_id, user_id=user_id
    )
    state.status, state.chunks, state.chunks_total, state.error = "indexing", 0, 0, None
    state.updated_at = utcnow()
    db.session.add(state)
    db.session.commit()
    db.session.remove()  # no transaction stays open while the text is chunked

    chunks = chunk_text(body)
    db.session.execute(
        text("DELETE FROM fts_document_chunks WHERE attachment_id = :a"), {"a": attachment_id}
    )
    state = db.session.get(DocumentIndex, attachment_id)
    state.chunks_total = len(chunks)
    db.session.commit()
    insert = text(
        "INSERT INTO fts_document_chunks (title, content, attachment_id, user_id, chunk) "
        "VALUES (:title, :content, :a, :u, :n)"
    )
    for start in range(0, len(chunks), BATCH_CHUNKS):
        batch = chunks[start : start + BATCH_CHUNKS]
        db.session.execute(
            insert,
            [
                {"title": title, "content": c, "a": attachment_id, "u": user_id, "n": start + i}
                for i, c in enumerate(batch)
            ],
        )
        state = db.session.get(DocumentIndex, attachment_id)
        state.chunks, state.updated_at = start + len(batch), utcnow()
        db.session.commit()
        db.session.remove()
        gevent.sleep(0)  # one batch per hub turn: indexing never starves turns or requests
    state = db.session.get(DocumentIndex, attachment_id)
    state.status, state.chunks, state.indexed_at, state.updated_at = (
        "done",
        len(chunks),
        utcnow(),
        utcnow(),
    )
    db.session.commit()


def ensure_indexed(app, user_id: int, attachment_ids: list[int] | None = None) -> int:
    """Start indexing this user's documents that are not indexed (nor being indexed).

    Returns how many documents are still being indexed. Does not wait for them.
    """
    query = (
        select(Attachment.id, DocumentIndex.status)
        .outerjoin(DocumentIndex, DocumentIndex.attachment_id == Attachment.id)
        .where(Attachment.user_id == user_id, Attachment.extracted_text.is_not(None))
    )
    if attachment_ids is not None:
        query = query.where(Attachment.id.in_(attachment_ids or [-1]))
    jobs = app.extensions.get(JOBS_KEY, {})
    busy = 0
    for attachment_id, status in db.session.execute(query).all():
        running = attachment_id in jobs and not jobs[attachment_id].dead
        if status in (None, "pending") or (status == "indexing" and not running):
            # Never indexed, or an indexing run that died with an earlier server process.
            schedule_indexing(app, attachment_id)
            busy += 1
        elif status == "indexing":
            busy += 1
    return busy


def document_rows(user_id: int) -> list[dict[str, Any]]:
    """The user's documents with their indexing state, newest first (for the settings page)."""
    rows = db.session.execute(
        select(
            Attachment.id,
            Attachment.filename,
            Attachment.size,
            Attachment.extracted_text.is_not(None),
            DocumentIndex.status,
            DocumentIndex.chunks,
            DocumentIndex.chunks_total,
            DocumentIndex.error,
        )
        .outerjoin(DocumentIndex, DocumentIndex.attachment_id == Attachment.id)
        .where(Attachment.user_id == user_id)
        .order_by(Attachment.id.desc())
        .limit(200)
    ).all()
    documents = []
    for attachment_id, filename, size, has_text, status, chunks, total, error in rows:
        status = status or ("pending" if has_text else "no_text")
        percent = 100 if status == "done" else (int(100 * (chunks or 0) / total) if total else 0)
        documents.append(
            {
                "id": attachment_id,
                "filename": filename,
                "size": size,
                "status": status,
                "chunks": chunks or 0,
                "chunks_total": total or 0,
                "percent": percent,
                "error": error,
            }
        )
    return documents


# --- the tool ------------------------------------------------------------------------------


def chat_attachment_ids(user_id: int, chat_id: str) -> list[int]:
    """Attachments referenced by the messages of one of this user's chats."""
    from ...chat.chats import get_chat

    get_chat(user_id, chat_id)
    ids: list[int] = []
    parts = db.session.execute(
        select(Message.content_parts_json).where(
            Message.chat_id == chat_id, Message.shown(), Message.content_parts_json.is_not(None)
        )
    ).scalars()
    for raw in parts:
        for part in json.loads(raw):
            if (
                isinstance(part, dict)
                and part.get("type") == "attachment"
                and isinstance(part.get("id"), int)
            ):
                ids.append(part["id"])
    return list(dict.fromkeys(ids))


def project_attachment_ids(user_id: int, chat_id: str) -> list[int]:
    """The files of the chat's project: a chat in a project searches them as its own."""
    from ...chat.projects import project_file_ids

    project_id = db.session.execute(
        select(Chat.project_id).where(Chat.id == chat_id, Chat.user_id == user_id)
    ).scalar()
    return project_file_ids(user_id, project_id)


def _run(arguments: dict[str, Any], context: ToolContext) -> ToolResult | str:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "Error: give a `query`: the words to look for in the user's documents."
    limit = arguments.get("limit", DEFAULT_RESULTS)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_RESULTS
    scope = (
        chat_attachment_ids(context.user_id, context.chat_id)
        + project_attachment_ids(context.user_id, context.chat_id)
        if context.settings.get("rag_scope") == "chat"
        else None
    )
    app = current_app._get_current_object()
    busy = ensure_indexed(app, context.user_id, scope)
    hits = search(context.user_id, query, limit=limit, attachment_ids=scope)
    note = (
        f"\n\n({busy} document{'s are' if busy != 1 else ' is'} still being indexed; "
        "search again later to include them.)"
        if busy
        else ""
    )
    if not hits:
        where = (
            "the documents attached to this chat" if scope is not None else "the user's documents"
        )
        return f"No passage in {where} matches {query!r}.{note}"
    sources = [
        {
            "title": f"{hit['title']} (chunk {hit['chunk'] + 1})",
            "url": None,
            "attachment_id": hit["attachment_id"],
            "chunk": hit["chunk"],
            "content": hit["content"],
        }
        for hit in hits
    ]
    lines = [
        f"{len(hits)} passage{'s' if len(hits) != 1 else ''} from the user's documents, best first:"
    ]
    lines += [f"- {source['title']}:\n{source['content']}" for source in sources]
    return ToolResult("\n\n".join(lines) + note, sources)


SEARCH_DOCUMENTS = Tool(
    name=NAME,
    description=(
        "Search the user's uploaded documents (full-text, best matches first) and return the "
        "most relevant passages with their source. Cite the sources you use."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"How many passages (default {DEFAULT_RESULTS}).",
            },
        },
        "required": ["query"],
    },
    run=_run,
    timeout=30,
)
