"""Full-text search over the document index, scoped before it matches.

The table fts_document_chunks (created by the migration by hand): SQLite FTS5 ranked with
bm25() (porter stemming; the title counts double), PostgreSQL a stored tsvector
(`search_vector`, english, the title weighted double) with a GIN index ranked with
ts_rank_cd, and elsewhere (SQLite without FTS5) a plain table searched
with LIKE, ranked by the number of query words found.

On FTS5 each chunk's rowid is its document's id shifted by CHUNK_BITS plus its number
(`fts_rowid`; the indexer writes them so, and a migration re-keyed the rows before it). A
search asks FTS5 for the rowid range of its scope's documents (the user's, or a chat's or
project's) and keeps their rows by the rowid's high bits, so it neither ranks another
user's chunks nor reads any row's text outside the scope; a passage, and a document's rows,
are found by rowid too (`of_document`). FTS5's UNINDEXED columns (user, document, chunk)
are read only for the rows found, to check their owner again.

FTS5's bm25() scores every row its query matches, so a word held by most of a user's
chunks would cost a pass over all of them (issue 37's scale rows). A search first counts
each query word's chunks, stopping at MAX_RANKED (`_frequencies`): when the words together
are in fewer, it ranks them all, exactly as one OR query. Otherwise the selective words (the
rarest, together in at most MAX_RANKED chunks) are kept apart from the common ones, and bm25
ranks every chunk of the scope holding a selective word, and of the others the newest
MAX_RANKED (`_ranked`), each scored with all the query's words. So a passage holding a rare
word is never lost behind common ones, a scope of fewer than MAX_RANKED matching chunks (a
chat's, most projects') is ranked exactly, and what goes unranked is only the older chunks
holding nothing but common words. The counts
are of the whole table, every user's chunks, as bm25()'s IDF is: a count is a length, it
reads no row of another user.

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
# The most chunks an FTS5 search ranks with bm25() beyond those holding its selective words
# (see the module's docstring): bm25() costs about 2 µs a chunk, plus a pass over each query
# word's list for its IDF; at 5,000 a query of common words over 200,000 chunks a user ranks
# in about 20-40 ms of CPU (bench/retrieval.py).
MAX_RANKED = 5000
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
        return _fts5_search(user_id, words, params, attachment_ids)
    if kind == "postgres":
        sql = _postgres_search(words, params, scope)
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


def _document_vector(table: str) -> str:
    """PostgreSQL's searchable vector of a chunk of `table` (fts_document_chunks or its
    alias): stored, its title under weight A and its text under B (migration 19438234b55e)."""
    return f"{table}.search_vector"


# ts_rank_cd's weights of D, C, B and A: a word of the title (A) counts double one of the text
# (B), as FTS5's bm25(fts_document_chunks, 2.0, 1.0) counts it.
RANK_WEIGHTS = "'{0.1, 0.2, 0.5, 1.0}'"


def _postgres_search(words: list[str], params: dict[str, Any], scope: str) -> str:
    """The PostgreSQL query: ts_rank_cd, which knows nothing of a word's rarity, so the
    chunks holding a selective word (as on FTS5: the rarest, together in at most MAX_RANKED
    chunks) come first when common words are asked beside them. Over a user's whole index,
    when its words are held by more, it ranks as FTS5 does: every chunk holding a selective
    word and the newest MAX_RANKED of the others (found newest first on the owner index)."""
    frequency = _frequencies(words)
    selective = _selective(words, frequency)
    params["q"] = " | ".join(words)
    vector, first = _document_vector("f"), ""
    rare = [w for w in selective if frequency[w]]
    if rare and len(selective) < len(words):
        params["rare"] = " | ".join(rare)
        first = f"({vector} @@ to_tsquery('english', :rare)) DESC, "
    bounded = ""
    if len(selective) < len(words) and not scope:
        params["window"] = MAX_RANKED
        candidates = (
            "(SELECT f.id FROM fts_document_chunks f WHERE f.user_id = :uid "
            f"AND {vector} @@ to_tsquery('english', :q) "
            "ORDER BY f.attachment_id DESC, f.chunk DESC LIMIT :window)"
        )
        if first:
            candidates += (
                " UNION (SELECT f.id FROM fts_document_chunks f WHERE f.user_id = :uid "
                f"AND {vector} @@ to_tsquery('english', :rare))"
            )
        bounded = f" AND f.id IN ({candidates})"
    return (
        "SELECT f.attachment_id, f.chunk, f.title, f.content, "
        f"ts_rank_cd({RANK_WEIGHTS}, {vector}, to_tsquery('english', :q)) AS score "
        "FROM fts_document_chunks f JOIN attachments a ON a.id = f.attachment_id "
        f"WHERE {vector} @@ to_tsquery('english', :q) "
        f"AND f.user_id = :uid AND a.user_id = :uid{scope}{bounded} "
        f"ORDER BY {first}score DESC LIMIT :k"
    )


def _fts5_search(
    user_id: int, words: list[str], params: dict[str, Any], attachment_ids: list[int] | None
) -> list[dict[str, Any]]:
    """The FTS5 search, scoped before it matches: to the rowid range of the scope's documents
    (the user's, or `attachment_ids`), and within it to their documents by the rowid's high
    bits, so neither another user's chunks nor the text of any chunk outside the scope is
    read. Ownership is checked again on the chunks ranked."""
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
        return []
    params["lo"], params["hi"] = fts_rowid(span[0], 0), fts_rowid(int(span[1]) + 1, 0) - 1
    scoped = (
        "fts_document_chunks MATCH :q AND rowid BETWEEN :lo AND :hi "
        f"AND (rowid >> {CHUNK_BITS}) IN ({documents})"
    )
    if attachment_ids is not None and _indexed_chunks(params) <= MAX_RANKED:
        # A chat's or project's few documents: all ranked, no word counted (the index's own
        # count of their chunks; one it lacks is ranked too, exactly, only slower).
        ranked = _bm25(_any_of(words), params, scoped)
    else:
        ranked = _ranked(words, params, scoped)
    if not ranked:
        return []
    # Their text, each chunk by its rowid (looked up first: CROSS JOIN keeps that order),
    # and its owner checked again.
    chosen = in_scope("f.rowid", params, [rowid for rowid, _ in ranked], "rowids")
    rows = db.session.execute(
        text(
            "SELECT f.rowid, f.attachment_id, f.chunk, f.title, f.content "
            "FROM fts_document_chunks f CROSS JOIN attachments a ON a.id = f.attachment_id "
            f"WHERE {chosen} AND f.user_id = :uid AND a.user_id = :uid"
            + (
                " AND f.attachment_id IN (SELECT value FROM json_each(:scope))"
                if attachment_ids
                else ""
            )
        ),
        params,
    ).all()
    by_rowid = {int(r[0]): r for r in rows}
    return [
        {
            "attachment_id": int(by_rowid[rowid][1]),
            "chunk": int(by_rowid[rowid][2]),
            "title": by_rowid[rowid][3],
            "content": by_rowid[rowid][4],
            "score": float(score),
        }
        for rowid, score in ranked
        if rowid in by_rowid
    ]


def _indexed_chunks(params: dict[str, Any]) -> int:
    """How many chunks the scope's documents (params["scope"]) of the user have, by their
    index state (document_index)."""
    return int(
        db.session.execute(
            text(
                "SELECT coalesce(sum(max(chunks, chunks_total)), 0) FROM document_index "
                "WHERE user_id = :uid AND attachment_id IN (SELECT value FROM json_each(:scope))"
            ),
            params,
        ).scalar()
    )


def _any_of(words: list[str]) -> str:
    """An FTS5 query matching any of `words`, each quoted (no FTS5 syntax from the user gets
    through)."""
    return " OR ".join(f'"{w}"' for w in words)


def _frequencies(words: list[str]) -> dict[str, int]:
    """How many chunks of the whole table hold each word, counted up to MAX_RANKED + 1 (a
    bounded walk of its list in the index: no ranking, no row's text read)."""
    params: dict[str, Any] = {"cap": MAX_RANKED + 1}
    fts5 = backend() == "fts5"
    counts = []
    for i, word in enumerate(words):
        params[f"w{i}"] = f'"{word}"' if fts5 else word
        holds = (
            f"fts_document_chunks MATCH :w{i}"
            if fts5
            else f"{_document_vector('fts_document_chunks')} @@ to_tsquery('english', :w{i})"
        )
        counts.append(
            f"(SELECT count(*) FROM (SELECT 1 FROM fts_document_chunks WHERE {holds} LIMIT :cap) c{i})"
        )
    row = db.session.execute(text("SELECT " + ", ".join(counts)), params).one()
    return {word: int(count) for word, count in zip(words, row)}


def _selective(words: list[str], frequency: dict[str, int]) -> list[str]:
    """The rarest of `words`, together held by at most MAX_RANKED chunks."""
    selective: list[str] = []
    total = 0
    for word in sorted(words, key=lambda w: frequency[w]):
        if total + frequency[word] > MAX_RANKED:
            break
        selective.append(word)
        total += frequency[word]
    return selective


def _bm25(
    query: str, params: dict[str, Any], scoped: str, ranked: bool = True
) -> list[tuple[int, float]]:
    """(rowid, bm25) of the scope's chunks matching `query`, best first (bm25() is smaller
    for better matches; the title counts double), the best params["k"] only if `ranked`."""
    sql = (
        "SELECT rowid, bm25(fts_document_chunks, 2.0, 1.0) AS score FROM fts_document_chunks "
        f"WHERE {scoped} ORDER BY score, rowid DESC" + (" LIMIT :k" if ranked else "")
    )
    return [(int(r[0]), float(r[1])) for r in db.session.execute(text(sql), {**params, "q": query})]


def _ranked(words: list[str], params: dict[str, Any], scoped: str) -> list[tuple[int, float]]:
    """The best params["k"] (rowid, bm25) of the scope for `words`: all its matching chunks
    ranked when few enough; else every one holding a selective word and the newest
    MAX_RANKED of the others (the module's docstring says why), each scored with every
    word."""
    everything = _any_of(words)
    selective = _selective(words, _frequencies(words))
    cutoff = None if len(selective) == len(words) else _cutoff(everything, params, scoped)
    if cutoff is None:
        return _bm25(everything, params, scoped)
    found: dict[int, float] = {}
    if selective:
        # The chunks holding a selective word, scored with every word: bm25() sums over the
        # query's phrases, so matching "(selective) AND (every word)" counts the selective
        # words twice; less their score alone, that is each chunk's bm25 for the whole
        # query. Both see the same IDF and lengths, so it is exact.
        some = _any_of(selective)
        once = dict(_bm25(some, params, scoped, ranked=False))
        twice = _bm25(f"({some}) AND ({everything})", params, scoped, ranked=False)
        found.update((rowid, score - once[rowid]) for rowid, score in twice if rowid in once)
    # Of the rest, the newest MAX_RANKED (a chunk holding every word is likelier the best,
    # but finding those walks every word's whole list: twice the time, bench/retrieval.py).
    for rowid, score in _bm25(everything, {**params, "lo": cutoff}, scoped):
        found.setdefault(rowid, score)
    return sorted(found.items(), key=lambda row: (row[1], -row[0]))[: params["k"]]


def _cutoff(query: str, params: dict[str, Any], scoped: str) -> int | None:
    """The rowid of the MAX_RANKED-th newest chunk of the scope matching `query` (a walk of
    its lists from the top, no bm25), or None when the scope holds fewer."""
    cutoff = db.session.execute(
        text(
            f"SELECT rowid FROM fts_document_chunks WHERE {scoped} "
            "ORDER BY rowid DESC LIMIT 1 OFFSET :window"
        ),
        {**params, "q": query, "window": MAX_RANKED - 1},
    ).scalar()
    return None if cutoff is None else int(cutoff)


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
