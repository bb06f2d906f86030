"""Full-text search across one user's chats: titles and message text.

Three engines, one result shape, picked by what the database offers:
- SQLite with the `fts_messages` FTS5 table (created and kept in sync by triggers in the
  migration): MATCH, snippets from FTS5's snippet();
- PostgreSQL: to_tsvector/to_tsquery (words only, last one a prefix) on the `fts_messages_idx` GIN expression index,
  among the newest 2,000 matches, snippets from ts_headline;
- anything else (or SQLite without FTS5): ILIKE, snippets cut in Python.
Every engine lists message hits newest first (by message id), as chat apps do: a person
looking for something said recently finds it on top. The relevance score (bm25 or ts_rank)
is still reported with each hit.

Every query joins messages to chats and filters by the owner, so a user only ever finds
their own live messages in their own live chats.

Snippets come back as segments `(text, is_hit)`; templates escape the text and add the
highlight markup themselves, so nothing from a message is ever marked safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, text

from ..errors import invalid
from ..extensions import db
from ..services import services
from ..models import Chat, Message

MAX_QUERY_CHARS = 200
# Private-use characters as hit markers inside snippets: they never reach the page (the
# snippet is split on them before rendering) and real text practically never holds them.
HIT_START, HIT_END = "\ue000", "\ue001"
SNIPPET_TOKENS = 12
SNIPPET_CHARS = 160
RANK_CANDIDATES = 2000  # PostgreSQL: how many of the newest matches are ranked


@dataclass
class MessageHit:
    chat_id: str
    chat_title: str
    message_id: int
    role: str
    segments: list[tuple[str, bool]]
    rank: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "chat_id": self.chat_id,
            "chat_title": self.chat_title,
            "message_id": self.message_id,
            "role": self.role,
            "snippet": "".join(t for t, _ in self.segments),
            "highlights": [t for t, hit in self.segments if hit],
        }


@dataclass
class SearchResults:
    query: str
    engine: str
    chats: list[Chat] = field(default_factory=list)
    messages: list[MessageHit] = field(default_factory=list)


def search(
    user_id: int, query: str, *, limit: int = 20, project_id: int | None = None
) -> SearchResults:
    """Chats whose title matches and messages whose text matches `query`, best first; with
    `project_id` (checked by the caller to be the user's), only the chats of that project."""
    if not isinstance(query, str):
        raise invalid("q must be text.")
    query = " ".join(query.split())[:MAX_QUERY_CHARS]
    engine = search_engine()
    results = SearchResults(query, engine)
    if not _terms(query):
        return results
    results.chats = _title_hits(user_id, query, limit, project_id)
    if engine == "fts5":
        results.messages = _fts5(user_id, query, limit, project_id)
    elif engine == "postgresql":
        results.messages = _postgres(user_id, query, limit, project_id)
    else:
        results.messages = _ilike(user_id, query, limit, project_id)
    return results


def search_engine() -> str:
    """ "fts5", "postgresql" or "ilike": what this database supports (checked once per engine)."""
    return services().search_engine.get()


def detect_engine(engine) -> str:
    """What `engine`'s database supports (one query): create_app makes it the lazy
    `Services.search_engine`."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            found = connection.execute(
                text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fts_messages'")
            ).first()
            return "fts5" if found else "ilike"
        if engine.dialect.name == "postgresql":
            found = connection.execute(text("SELECT to_regclass('fts_messages_idx')")).scalar()
            return "postgresql" if found else "ilike"
    return "ilike"


def _terms(query: str) -> list[str]:
    return re.findall(r"\w+", query)


def _in_project(project_id: int | None) -> str:
    """The SQL condition that keeps one project's chats (`c` is the chats table)."""
    return " AND c.project_id = :project" if project_id is not None else ""


def _title_hits(user_id: int, query: str, limit: int, project_id: int | None) -> list[Chat]:
    stmt = select(Chat).where(
        Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.temporary.is_(False)
    )
    if project_id is not None:
        stmt = stmt.where(Chat.project_id == project_id)
    for term in _terms(query):
        stmt = stmt.where(Chat.title.ilike(f"%{term}%"))
    return list(db.session.execute(stmt.order_by(Chat.updated_at.desc()).limit(limit)).scalars())


def _fts5_query(query: str) -> str:
    # Every word quoted (so FTS5 operators in user input are plain text), all required, the
    # last one as a prefix so results appear while typing.
    terms = [f'"{t}"' for t in _terms(query)]
    terms[-1] += "*"
    return " ".join(terms)


def _tsquery(query: str) -> str:
    # Words only (\w+ holds none of to_tsquery's operators), all required, the last a prefix:
    # the same meaning as the FTS5 query.
    terms = _terms(query)
    terms[-1] += ":*"
    return " & ".join(terms)


def _fts5(user_id: int, query: str, limit: int, project_id: int | None) -> list[MessageHit]:
    rows = db.session.execute(
        text(
            "SELECT m.id, m.chat_id, m.role, c.title, "
            "snippet(fts_messages, 0, :start, :end, '…', :tokens) AS snip, bm25(fts_messages) AS rank "
            "FROM fts_messages "
            "JOIN messages m ON m.id = fts_messages.rowid "
            "JOIN chats c ON c.id = m.chat_id "
            "WHERE fts_messages MATCH :match AND c.user_id = :user AND c.deleted_at IS NULL "
            "AND NOT c.temporary AND m.deleted_at IS NULL AND m.active"  # the shown versions only
            + _in_project(project_id)
            + " ORDER BY m.id DESC LIMIT :limit"
        ),
        {
            "start": HIT_START,
            "end": HIT_END,
            "tokens": SNIPPET_TOKENS,
            "match": _fts5_query(query),
            "user": user_id,
            "limit": limit,
            "project": project_id,
        },
    )
    return [
        MessageHit(r.chat_id, r.title, r.id, r.role, split_snippet(r.snip), r.rank) for r in rows
    ]


# PostgreSQL indexes the first INDEXED_PREFIX_CHARS characters of each message: to_tsvector
# refuses a text whose words take over 1 MB, and the index computes it on every insert (an
# answer of 30,000 distinct hashes could not be saved). The expression is the index's own
# (migration b8d4f1a6c2e9): the query must repeat it exactly for the index to be used.
INDEXED_PREFIX_CHARS = 100_000
_TSVECTOR = "to_tsvector('simple', left(coalesce({column}, ''), %d))" % INDEXED_PREFIX_CHARS


def _postgres(user_id: int, query: str, limit: int, project_id: int | None) -> list[MessageHit]:
    # The GIN index finds the matches; ranking needs each match's tsvector, recomputed from
    # the text (an expression index stores none), so only the newest RANK_CANDIDATES
    # matches are scored: a word found in tens of thousands of messages stays fast.
    rows = db.session.execute(
        text(
            "WITH tsq AS (SELECT to_tsquery('simple', :query) AS q), "
            "candidates AS ("
            "  SELECT m.id, m.content FROM messages m JOIN chats c ON c.id = m.chat_id, tsq "
            f"  WHERE {_TSVECTOR.format(column='m.content')} @@ tsq.q "
            "  AND c.user_id = :user AND c.deleted_at IS NULL AND NOT c.temporary "
            "  AND m.deleted_at IS NULL AND m.active "
            "  AND m.role IN ('user', 'assistant')" + _in_project(project_id) + " "
            "  ORDER BY m.id DESC LIMIT :candidates), "
            "ranked AS ("
            "  SELECT candidates.id, candidates.content, "
            f"  ts_rank({_TSVECTOR.format(column='candidates.content')}, tsq.q) AS rank "
            "  FROM candidates, tsq ORDER BY candidates.id DESC LIMIT :limit) "
            "SELECT m.id, m.chat_id, m.role, c.title, ranked.rank, "
            f"ts_headline('simple', left(ranked.content, {INDEXED_PREFIX_CHARS}), tsq.q, :options) AS snip "
            "FROM ranked JOIN messages m ON m.id = ranked.id JOIN chats c ON c.id = m.chat_id, tsq "
            "ORDER BY m.id DESC"
        ),
        {
            "query": _tsquery(query),
            "user": user_id,
            "limit": limit,
            "candidates": RANK_CANDIDATES,
            "project": project_id,
            "options": f"StartSel={HIT_START}, StopSel={HIT_END}, MaxWords=20, MinWords=8, MaxFragments=1",
        },
    )
    return [
        MessageHit(r.chat_id, r.title, r.id, r.role, split_snippet(r.snip), float(r.rank))
        for r in rows
    ]


def _ilike(user_id: int, query: str, limit: int, project_id: int | None) -> list[MessageHit]:
    terms = _terms(query)
    stmt = (
        select(Message, Chat.title)
        .join(Chat, Chat.id == Message.chat_id)
        .where(
            Chat.user_id == user_id,
            Chat.deleted_at.is_(None),
            Chat.temporary.is_(False),
            Message.shown(),
            Message.role.in_(("user", "assistant")),
        )
    )
    if project_id is not None:
        stmt = stmt.where(Chat.project_id == project_id)
    for term in terms:
        stmt = stmt.where(Message.content.ilike(f"%{term}%"))
    rows = db.session.execute(stmt.order_by(Message.id.desc()).limit(limit))
    return [
        MessageHit(m.chat_id, title, m.id, m.role, _cut_snippet(m.content or "", terms))
        for m, title in rows
    ]


def split_snippet(snippet: str | None) -> list[tuple[str, bool]]:
    """Marker-delimited snippet text → [(text, is_hit)], markers removed."""
    segments: list[tuple[str, bool]] = []
    for piece in re.split(f"({HIT_START}.*?{HIT_END})", snippet or "", flags=re.S):
        if not piece:
            continue
        if piece.startswith(HIT_START):
            segments.append((piece[1:-1], True))
        else:
            segments.append((piece.replace(HIT_START, "").replace(HIT_END, ""), False))
    return segments


def _cut_snippet(content: str, terms: list[str]) -> list[tuple[str, bool]]:
    """A window of `content` around the first hit with every term occurrence marked."""
    lowered = content.lower()
    first = min((i for i in (lowered.find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(0, first - SNIPPET_CHARS // 3)
    window = content[start : start + SNIPPET_CHARS]
    prefix, suffix = ("…" if start else ""), ("…" if start + SNIPPET_CHARS < len(content) else "")
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.I)
    segments: list[tuple[str, bool]] = [(prefix, False)] if prefix else []
    position = 0
    for match in pattern.finditer(window):
        if match.start() > position:
            segments.append((window[position : match.start()], False))
        segments.append((match.group(0), True))
        position = match.end()
    if position < len(window):
        segments.append((window[position:], False))
    if suffix:
        segments.append((suffix, False))
    return segments
