"""The document index: chunks, full-text search and the background indexer.

- Chunking: along each document's structure (numi/knowledge/chunking.py), in the CPU pool.
- Full text: the table fts_document_chunks, searched by numi/knowledge/full_text.py (its
  rows written here, on FTS5 under rowids keyed by their document: `fts_rowid`).
- Where each chunk was found, and its vector: `DocumentChunk`, same attachment id and chunk
  number (numi/knowledge/vectors.py searches the vectors).
- State per document: a DocumentIndex row (pending → indexing → done | error, with chunks /
  chunks_total as progress), and the vectors' own state (`embedding_status`: indexing →
  done, or pending with the reason; `embedded_chunks` as progress; `embedding_model`).
  Indexing runs in a background greenlet that commits one small batch at a time and yields
  between batches; vectors are made in batches in the CPU pool (a local model) or by the
  endpoint. `schedule_indexing(app, attachment_id)` starts it (the upload code calls it),
  and `ensure_indexed` starts it for documents not indexed yet or whose vectors were made
  by another model than theirs: the user's, or for a project's file the project's own
  when it chose one (a changed model re-indexes in the background; search keeps working on
  full text meanwhile).

Every query is scoped to its owner.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from sqlalchemy import delete, select, text

from ..cpu_pool import busy_jobs, pool_state, run_cpu
from ..extensions import db
from ..models import (
    Attachment,
    DocumentChunk,
    DocumentIndex,
    ProjectFile,
    User,
    utcnow,
)
from ..services import services
from .chunking import chunk_document
from .full_text import CHUNK_BITS, backend, fts_rowid, of_document

# The search half, re-exported: the index's callers search it through this module.
from .full_text import chunk_rows as chunk_rows
from .full_text import query_words as query_words
from .full_text import search as search
from ..errors import NotFound, NumiError
from .embedding import choice, document_project, document_projects, embedder_for, name_of
from .vectors import store_vectors, vector_backend

log = logging.getLogger(__name__)

BATCH_CHUNKS = 32  # chunks written (or embedded) per transaction; the hub gets a turn after each

# --- indexing ------------------------------------------------------------------------------


def schedule_indexing(app, attachment_id: int) -> bool:
    """Index one document in the background (no-op while it is being indexed already).

    Returns whether a new indexing job started. Never blocks: the work runs in a greenlet.
    """
    jobs = services(app).document_jobs
    running = jobs.get(attachment_id)
    if running is not None and not running.dead:
        return False
    jobs[attachment_id] = gevent.spawn(_index_job, app, attachment_id)
    return True


# How often, in this process, `wait_for_indexing`'s wait ended before its deadline with a
# job still running, and the most seconds it had left then (tests/fixtures/cpu_pool.py
# lists a test where it did).
early_wait_ends = 0
early_wait_most_left = 0.0


def wait_for_indexing(app, timeout: float | None = None) -> None:
    """Wait for the running indexing jobs (for the CLI and tests).

    Raises TimeoutError when one is still running at the deadline: a caller that goes on
    would search a half-built index and see fewer passages than there are.

    The deadline is the monotonic clock's, and the wait goes on until it: in two CI
    sightings (issue 36) `gevent.joinall(jobs, timeout=60)` came back within seconds with
    both jobs alive, their work done and their greenlets about to resume, in a test worker
    whose hub had run 45 loop iterations in its life.
    """
    global early_wait_ends, early_wait_most_left
    jobs = dict(services(app).document_jobs)
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    alive, early = list(jobs.values()), 0
    while alive:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        gevent.joinall(alive, timeout=left)
        alive = [job for job in alive if not job.dead]
        now = time.monotonic()
        if alive and (deadline is None or now < deadline):
            early += 1
            short = None if deadline is None else deadline - now
            log.warning(
                "the hub's wait for indexing ended early, with %d job(s) running and %s s"
                " of %s s left",
                len(alive),
                "?" if short is None else f"{short:.3f}",
                timeout,
            )
            early_wait_ends += 1
            early_wait_most_left = max(early_wait_most_left, short or 0.0)
    running = {a: job for a, job in jobs.items() if not job.dead}
    if running:
        # Where each one waits, so a stuck index says why (a lock, the CPU pool, an endpoint).
        where = "; ".join(
            f"document {a} at {_waiting_at(job)} ({_hub_of(job)})" for a, job in running.items()
        )
        busy = "; ".join(busy_jobs()) or "none"
        raise TimeoutError(
            f"{len(running)} document(s) still indexing after {timeout} s"
            f" ({time.monotonic() - started:.1f} s by the clock; the hub's wait ended"
            f" {early} time(s) with a job running): {where}."
            f" The CPU pool runs: {busy} ({pool_state()})"
        )


def stop_indexing(app, timeout: float | None = None) -> None:
    """Stop the app's indexing jobs (for tests and a stopping process). A stopped document
    keeps the state it reached; `ensure_indexed` starts it again later."""
    jobs = services(app).document_jobs
    gevent.killall([job for job in jobs.values() if not job.dead], timeout=timeout)
    jobs.clear()


def _waiting_at(job) -> str:
    """Where a suspended greenlet waits: its innermost frame (a library's: the lock or event
    it is parked on) and its innermost frames that are Numi's own, as file:line."""
    package = str(Path(__file__).parents[1])
    frame, ours, innermost = job.gr_frame, [], None
    while frame is not None:
        name = frame.f_code.co_filename
        if innermost is None:
            innermost = f"{Path(name).parent.name}/{Path(name).name}:{frame.f_lineno}"
        if name.startswith(package):
            ours.append(f"numi{name[len(package) :]}:{frame.f_lineno}")
        frame = frame.f_back
    if innermost is None:
        return "not started"
    return " < ".join([innermost, *ours[:4]])


def _hub_of(job) -> str:
    """Whose hub a job runs in: this thread's, or another's (a job spawned on another thread
    waits for that thread to run its loop; issue 36's stuck index points there), with the
    Numi frames it was spawned from."""
    hub = job.parent
    if hub is gevent.get_hub():
        return "this thread's hub"
    ident = getattr(hub, "thread_ident", None)
    thread = "alive" if ident in sys._current_frames() else "gone"
    frames, frame = [], getattr(job, "spawning_stack", None)
    while frame is not None and len(frames) < 6:
        frames.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}")
        frame = frame.f_back
    return (
        f"the hub of another thread ({thread}; its CPU pool: {pool_state(hub)}),"
        f" spawned at {' < '.join(frames) or '?'}"
    )


def _index_job(app, attachment_id: int) -> None:
    with app.app_context():
        try:
            state = db.session.get(DocumentIndex, attachment_id)
            has_chunks = db.session.execute(
                select(DocumentChunk.chunk)
                .where(DocumentChunk.attachment_id == attachment_id)
                .limit(1)
            ).first()
            if state is None or state.status != "done" or has_chunks is None:
                _index(attachment_id)
            _embed(attachment_id)
        except DocumentGone:
            db.session.rollback()  # nothing is left to index, nor to mark as failed
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
            jobs = services(app).document_jobs
            if jobs.get(attachment_id) is gevent.getcurrent():
                jobs.pop(attachment_id, None)


class DocumentGone(Exception):
    """The document was deleted while it was being indexed (its index row went with it)."""


def _index_state(attachment_id: int) -> DocumentIndex:
    """The index row of a document being indexed, read again after the session was let go."""
    state = db.session.get(DocumentIndex, attachment_id)
    if state is None:
        raise DocumentGone(attachment_id)
    return state


def _index(attachment_id: int) -> None:
    attachment = db.session.get(Attachment, attachment_id)
    if attachment is None:
        return
    user_id, title, mime = attachment.user_id, attachment.filename, attachment.mime
    body = attachment.extracted_text or ""
    state = db.session.get(DocumentIndex, attachment_id) or DocumentIndex(
        attachment_id=attachment_id, user_id=user_id
    )
    state.status, state.chunks, state.chunks_total, state.error = "indexing", 0, 0, None
    state.embedding_status, state.embedded_chunks, state.embedding_model = None, 0, None
    state.updated_at = utcnow()
    db.session.add(state)
    db.session.commit()
    db.session.remove()  # no transaction stays open while the text is chunked

    chunks = run_cpu(chunk_document, body, title, mime)
    if len(chunks) >= 1 << CHUNK_BITS:
        raise NumiError(
            "too_many_chunks",
            f"The document has {len(chunks):,} passages; at most {(1 << CHUNK_BITS) - 1:,} are indexed.",
            413,
        )
    params: dict[str, Any] = {}
    document = of_document("fts_document_chunks", params, attachment_id)
    db.session.execute(text(f"DELETE FROM fts_document_chunks WHERE {document}"), params)
    db.session.execute(delete(DocumentChunk).where(DocumentChunk.attachment_id == attachment_id))
    state = _index_state(attachment_id)
    state.chunks_total = len(chunks)
    db.session.commit()
    # On FTS5 each chunk's rowid is keyed by its document (fts_rowid), so search seeks to a
    # scope's documents; elsewhere the table numbers its rows itself.
    keyed = backend() == "fts5"
    insert = text(
        "INSERT INTO fts_document_chunks (title, content, attachment_id, user_id, chunk"
        + (", rowid) " if keyed else ") ")
        + "VALUES (:title, :content, :a, :u, :n"
        + (", :rowid)" if keyed else ")")
    )
    for start in range(0, len(chunks), BATCH_CHUNKS):
        batch = chunks[start : start + BATCH_CHUNKS]
        db.session.execute(
            insert,
            [
                {
                    "title": title,
                    "content": c.text,
                    "a": attachment_id,
                    "u": user_id,
                    "n": start + i,
                    **({"rowid": fts_rowid(attachment_id, start + i)} if keyed else {}),
                }
                for i, c in enumerate(batch)
            ],
        )
        db.session.add_all(
            DocumentChunk(
                attachment_id=attachment_id,
                chunk=start + i,
                user_id=user_id,
                heading=c.heading,
                page=c.page,
                line_start=c.line_start,
                line_end=c.line_end,
            )
            for i, c in enumerate(batch)
        )
        state = _index_state(attachment_id)
        state.chunks, state.updated_at = start + len(batch), utcnow()
        db.session.commit()
        db.session.remove()
        gevent.sleep(0)  # one batch per hub turn: indexing never starves turns or requests
    state = _index_state(attachment_id)
    state.status, state.chunks, state.indexed_at, state.updated_at = (
        "done",
        len(chunks),
        utcnow(),
        utcnow(),
    )
    db.session.commit()


def _embed(attachment_id: int) -> None:
    """Vectors for a document's chunks with its model (its project's, else the user's), a
    batch at a time; a failure marks them pending with the reason (full-text search is
    unaffected)."""
    state = _index_state(attachment_id)
    user_id = state.user_id
    project = document_project(user_id, attachment_id)
    embedder = embedder_for(user_id, project) if vector_backend() else None
    if embedder is None:
        state.embedding_status = None  # full-text only: nothing to wait for
        db.session.commit()
        return
    state.embedding_status, state.embedding_error, state.embedded_chunks = "indexing", None, 0
    db.session.commit()
    params: dict[str, Any] = {"u": user_id}
    rows = db.session.execute(
        text(
            "SELECT f.chunk, f.title, f.content, c.heading FROM fts_document_chunks f "
            "LEFT JOIN document_chunks c ON c.attachment_id = f.attachment_id AND c.chunk = f.chunk "
            f"WHERE {of_document('f', params, attachment_id)} AND f.user_id = :u ORDER BY f.chunk"
        ),
        params,
    ).all()
    known_dim = db.session.execute(
        select(DocumentChunk.dim)
        .where(
            DocumentChunk.user_id == user_id,
            DocumentChunk.model == embedder.name,
            DocumentChunk.attachment_id != attachment_id,
            DocumentChunk.dim.is_not(None),
        )
        .limit(1)
    ).scalar()
    db.session.remove()  # no transaction is held while the endpoint or the CPU pool works
    try:
        for start in range(0, len(rows), BATCH_CHUNKS):
            batch = rows[start : start + BATCH_CHUNKS]
            vectors = embedder.embed(
                ["\n".join(filter(None, (r.title, r.heading, r.content))) for r in batch]
            )
            dim = int(vectors.shape[1])
            if known_dim and dim != known_dim:
                raise NumiError(
                    "embedding_wrong_dimension",
                    f"{embedder.label} answered {dim} dimensions; its other vectors have {known_dim}.",
                    502,
                )
            known_dim = dim
            store_vectors(
                attachment_id, embedder.name, [(r.chunk, v) for r, v in zip(batch, vectors)]
            )
            state = _index_state(attachment_id)
            state.embedded_chunks, state.updated_at = start + len(batch), utcnow()
            db.session.commit()
            db.session.remove()
            gevent.sleep(0)
    except NumiError as exc:
        db.session.rollback()
        log.info("vectors of document %s pending: %s", attachment_id, exc.code)
        state = _index_state(attachment_id)
        state.embedding_status, state.embedding_error = "pending", f"{exc.code}: {exc.message}"
        state.updated_at = utcnow()
        db.session.commit()
        return
    state = _index_state(attachment_id)
    state.embedding_status, state.embedding_model = "done", embedder.name
    state.embedded_chunks, state.updated_at = len(rows), utcnow()
    db.session.commit()


def ensure_indexed(
    app, user_id: int, attachment_ids: list[int] | None = None, *, retry: bool = False
) -> int:
    """Start indexing this user's documents that are not indexed (nor being indexed), or
    whose vectors are not of their model (a project's own for its files, else the user's);
    with `retry`, also those whose vectors are pending after a failure. Returns how many
    documents are not yet searchable by their words (vectors being made meanwhile do not
    count: full text finds those documents).
    Does not wait."""
    query = (
        select(
            Attachment.id,
            DocumentIndex.status,
            DocumentIndex.embedding_status,
            DocumentIndex.embedding_model,
        )
        .outerjoin(DocumentIndex, DocumentIndex.attachment_id == Attachment.id)
        .where(Attachment.user_id == user_id, Attachment.extracted_text.is_not(None))
    )
    if attachment_ids is not None:
        query = query.where(Attachment.id.in_(attachment_ids or [-1]))
    searchable = bool(vector_backend())
    user = db.session.get(User, user_id)
    jobs = services(app).document_jobs
    busy = 0
    rows = db.session.execute(query).all()
    projects = document_projects(user_id, attachment_ids) if searchable and rows else {}
    for attachment_id, status, vectors, vector_model in rows:
        # A project's document (its file, or a project chat's attachment) is embedded with
        # the project's model when it chose one: a changed project model re-indexes it here,
        # as a changed user model does; the same rule as `_embed`'s (document_projects).
        model = name_of(choice(user, projects.get(attachment_id))) if searchable else None
        running = attachment_id in jobs and not jobs[attachment_id].dead
        unsearchable = status != "done"  # its words are not all searchable yet
        stale_vectors = (
            not unsearchable
            and model is not None
            and vector_model != model
            and (vectors not in ("pending", "indexing") or retry)
        )
        if not running and (unsearchable or stale_vectors):
            # Never indexed, an indexing run that died with an earlier server process, or
            # vectors of another model (the user changed it) or none yet.
            schedule_indexing(app, attachment_id)
        busy += unsearchable
    return busy


def delete_document(app, user_id: int, attachment_id: int) -> None:
    """Delete one of the user's documents: its full-text rows, chunks and vectors, index
    state, project membership and the attachment row, in one transaction; then its file,
    unless another row (the same bytes uploaded again) still uses it. A foreign or missing
    id is NotFound and changes nothing. A message that attached it says the file is no
    longer available; an answer citing it says the passage is gone."""
    attachment = db.session.execute(
        select(Attachment).where(Attachment.id == attachment_id, Attachment.user_id == user_id)
    ).scalar_one_or_none()
    if attachment is None:
        raise NotFound("document")
    job = services(app).document_jobs.pop(attachment_id, None)
    if job is not None and not job.dead:
        job.kill()  # its rows go now; an indexer that went on would write them again
    storage_path = attachment.storage_path
    params: dict[str, Any] = {"u": user_id}
    document = of_document("fts_document_chunks", params, attachment_id)
    db.session.execute(
        text(f"DELETE FROM fts_document_chunks WHERE {document} AND user_id = :u"), params
    )
    for table in (DocumentChunk, DocumentIndex, ProjectFile):
        db.session.execute(
            delete(table).where(table.attachment_id == attachment_id, table.user_id == user_id)
        )
    db.session.delete(attachment)
    db.session.commit()
    still_used = db.session.execute(
        select(Attachment.id).where(Attachment.storage_path == storage_path).limit(1)
    ).first()
    if still_used is None:
        (Path(app.config["NUMI_DATA_DIR"]) / storage_path).unlink(missing_ok=True)


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
            DocumentIndex.embedding_status,
            DocumentIndex.embedding_error,
            DocumentIndex.embedded_chunks,
            DocumentIndex.embedding_model,
        )
        .outerjoin(DocumentIndex, DocumentIndex.attachment_id == Attachment.id)
        .where(Attachment.user_id == user_id)
        .order_by(Attachment.id.desc())
        .limit(200)
    ).all()
    documents = []
    for (
        attachment_id, filename, size, has_text, status, chunks, total, error,
        vectors, vectors_error, embedded, vectors_model,
    ) in rows:  # fmt: skip
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
                "vectors": vectors,  # None (full text only), indexing, done, pending
                "vectors_error": vectors_error,
                "vectors_done": embedded or 0,
                "vectors_model": vectors_model,  # the model its (done) vectors were made by
            }
        )
    return documents
