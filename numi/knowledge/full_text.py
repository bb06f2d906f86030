"""Full-text search over the document index, scoped before it matches.

The table fts_document_chunks (created by the migration by hand): SQLite FTS5 ranked with
bm25() (porter stemming; the title counts double), PostgreSQL to_tsvector('english') with a
GIN index ranked with ts_rank_cd, and elsewhere (SQLite without FTS5) a plain table searched
with LIKE, ranked by the number of query words found.

On FTS5 each chunk's rowid is its document's id shifted by CHUNK_BITS plus its number
(`fts_rowid`; the indexer writes them so, and a migration re-keyed the rows before it). A
search asks FTS5 for the rowid range of its scope's documents (the user's, or a chat's or
project's) and keeps their rows by the rowid's high bits, so it neither ranks another
user's chunks nor reads any row's text outside the scope; a passage, and a document's rows,
are found by rowid too (`of_document`). FTS5's UNINDEXED columns (user, document, chunk)
are read only for the rows found, to check their owner again. bm25() still counts each
query word's documents over the whole table: a common word costs a pass over its list.

Every query is scoped to its owner.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import text

from ..extensions import db
from ..services import services
from .scope import in_scope

MAX_QUERY_WORDS = 32
MAX_RESULTS = 50
# A chunk's FTS5 rowid is its document's id shifted by CHUNK_BITS, plus its number
# (`fts_rowid`): a document of more chunks than that is refused (too_many_chunks).
CHUNK_BITS = 20


def backend() -> str:
    """'fts5', 'postgres' or 'like' — how fts_document_chunks was created on this database."""
    engine = db.engine
    cache = services().document_backends
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


def query_words(query: str) -> list[str]:
    """The words of a query that full-text search looks for."""
    words = [w for w in re.findall(r"\w+", (query or "").lower()) if len(w) > 1 or w.isdigit()]
    return list(dict.fromkeys(words))[:MAX_QUERY_WORDS]


def fts_rowid(attachment_id: int, chunk: int) -> int:
    """The FTS5 rowid of a document's chunk: its document's id in the high bits, so each
    document's chunks are one rowid range, which FTS5 seeks to instead of matching the
    query's words across every user's chunks first."""
    return (int(attachment_id) << CHUNK_BITS) | int(chunk)


def of_document(table: str, params: dict[str, Any], attachment_id: int) -> str:
    """A SQL condition: the rows of `table` (fts_document_chunks, or its alias) of this
    document, found on FTS5 through its rowid range rather than by reading every row."""
    params["doc_a"] = int(attachment_id)
    if backend() != "fts5":
        return f"{table}.attachment_id = :doc_a"
    params["doc_lo"], params["doc_hi"] = (
        fts_rowid(attachment_id, 0),
        fts_rowid(attachment_id + 1, 0) - 1,
    )
    return f"{table}.rowid BETWEEN :doc_lo AND :doc_hi AND {table}.attachment_id = :doc_a"


def search(
    user_id: int,
    query: str,
    *,
    limit: int = 5,
    attachment_ids: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The best passages of this user's indexed documents (or of `attachment_ids` only, any
    number of them) for `query` by its words, best first (full text only;
    numi.knowledge.retrieval fuses it with the vectors)."""
    words = query_words(query)
    if not words or attachment_ids == []:
        return []
    params: dict[str, Any] = {"uid": user_id, "k": max(1, min(int(limit), MAX_RESULTS))}
    scope = ""
    if attachment_ids is not None:
        scope = " AND " + in_scope("f.attachment_id", params, attachment_ids)
    kind = backend()
    if kind == "fts5":
        sql = _fts5_search(user_id, words, params, attachment_ids)
        if sql is None:
            return []
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


def _fts5_search(
    user_id: int, words: list[str], params: dict[str, Any], attachment_ids: list[int] | None
) -> str | None:
    """The FTS5 query, scoped before it matches: to the rowid range of the scope's documents
    (the user's, or `attachment_ids`), and within it to their documents by the rowid's high
    bits, so neither another user's chunks nor the text of any chunk outside the scope is
    read. Ownership is checked again on the chunks ranked. None: nothing to search."""
    if attachment_ids is None:
        span = db.session.execute(
            text("SELECT min(id), max(id) FROM attachments WHERE user_id = :uid"), params
        ).one()
        documents = "SELECT id FROM attachments WHERE user_id = :uid"
    else:
        span = (min(attachment_ids), max(attachment_ids))
        # The scope's documents that are the user's: another's never takes a ranked place.
        documents = (
            "SELECT id FROM attachments WHERE user_id = :uid "
            "AND id IN (SELECT value FROM json_each(:scope))"
        )
    if span[0] is None:
        return None
    params["lo"], params["hi"] = fts_rowid(span[0], 0), fts_rowid(int(span[1]) + 1, 0) - 1
    # Every word quoted (no FTS5 syntax from the user gets through), any word may match;
    # bm25() is smaller for better matches.
    params["q"] = " OR ".join(f'"{w}"' for w in words)
    # Materialised, and joined in this order (CROSS JOIN): the ranked few are read once,
    # then their text; left to the planner, it reads every chunk's text first.
    return (
        "WITH best AS MATERIALIZED (SELECT rowid, bm25(fts_document_chunks, 2.0, 1.0) AS score "
        "FROM fts_document_chunks WHERE fts_document_chunks MATCH :q "
        f"AND rowid BETWEEN :lo AND :hi AND (rowid >> {CHUNK_BITS}) IN ({documents}) "
        "ORDER BY score LIMIT :k) "
        "SELECT f.attachment_id, f.chunk, f.title, f.content, best.score FROM best "
        "CROSS JOIN fts_document_chunks f ON f.rowid = best.rowid "
        "CROSS JOIN attachments a ON a.id = f.attachment_id "
        "WHERE f.user_id = :uid AND a.user_id = :uid"
        + (
            " AND f.attachment_id IN (SELECT value FROM json_each(:scope))"
            if attachment_ids
            else ""
        )
        + " ORDER BY best.score"
    )


def chunk_rows(user_id: int, keys: list[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The text, document name and where-found of these (attachment id, chunk) of the user."""
    if not keys:
        return {}
    params: dict[str, Any] = {"uid": user_id}
    join = "JOIN"
    if backend() == "fts5":
        # Each chunk by its keyed rowid, looked up first (CROSS JOIN keeps that order):
        # finding a pair by the UNINDEXED columns reads every row of the table.
        chosen = in_scope("f.rowid", params, [fts_rowid(a, n) for a, n in keys], "rowids")
        join = "CROSS JOIN"
    else:
        pairs = []
        for i, (attachment_id, chunk) in enumerate(keys):
            params[f"a{i}"], params[f"n{i}"] = int(attachment_id), int(chunk)
            pairs.append(f"(f.attachment_id = :a{i} AND f.chunk = :n{i})")
        chosen = f"({' OR '.join(pairs)})"
    rows = db.session.execute(
        text(
            "SELECT f.attachment_id, f.chunk, a.filename, f.content, "
            "c.heading, c.page, c.line_start, c.line_end "
            f"FROM fts_document_chunks f {join} attachments a ON a.id = f.attachment_id "
            "LEFT JOIN document_chunks c ON c.attachment_id = f.attachment_id AND c.chunk = f.chunk "
            f"WHERE f.user_id = :uid AND a.user_id = :uid AND {chosen}"
        ),
        params,
    ).all()
    found = {}
    wanted = {(int(a), int(n)) for a, n in keys}
    for a, n, name, content, heading, page, line_start, line_end in rows:
        if (int(a), int(n)) not in wanted:
            continue
        where: dict[str, Any] = {"chunk": int(n) + 1}
        if heading:
            where["heading"] = heading
        if page:
            where["page"] = int(page)
        if line_start:
            where["lines"] = [int(line_start), int(line_end or line_start)]
        found[(int(a), int(n))] = {"name": name, "text": content, "where": where}
    return found
