"""Finding passages: full text and vectors fused, and the passages a chat's request carries.

`retrieve` asks both indexes for their best candidates, with the query's question words
("How do I ...?") left out, and fuses the two rankings by weighted reciprocal rank: a
chunk's score is the sum, over the rankings it is in, of `weight / (RRF_K + rank)`. Each
passage says why it was found: "words" (full text), "meaning" (vectors), or both. Without
vectors (no model, no extra, an endpoint down, a vector extension that did not load) it is
full text alone, and says so (`mode`). A user with a reranker (numi/knowledge/rerank.py)
gets the best fused passages in its order (`reranked`); one that fails leaves the fused
order, and the note says why. Without one, a search whose vectors are the local model's
fuses a third ranking in, the local model's word-by-word matching of the best fused
passages (numi/knowledge/late_interaction.py); `ranked_by` says which of the two ordered it.

"Use documents" (a chat's setting, else its project's, else automatically): in `auto`, a
chat with documents (its attachments and its project's files) gets the best passages for
its newest question in its system context, within NUMI_DOCUMENTS_CONTEXT_TOKENS, before
each request is built, but those the user left out in the context panel (the chat's setting
`left_out_passages`, until brought back: the next best come instead), the question's vector
made by the chat's project's own embedding model when it chose one; `ask` leaves them to
the model's `search_documents`; `never` does neither. Every query is scoped to the chat's
owner.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from flask import current_app
from sqlalchemy import Select, bindparam, select

from ..chat.chats import USE_DOCUMENTS
from ..chat.projects import project_file_ids
from ..extensions import db
from ..models import Attachment, Chat, Message, Project, User
from ..errors import NumiError
from ..cpu_pool import run_cpu
from . import late_interaction, rerank
from .embedding import LOCAL_MODEL, embedder_for, local_model
from .index import chunk_rows, ensure_indexed, search
from .vectors import nearest, vector_backend

log = logging.getLogger(__name__)

# The fusion (RRF_K, the weights, CANDIDATES) and leaving the question words out were
# chosen on the labelled set's synonym-paraphrased half (bench/retrieval_quality.py: 520
# documents of Python's docstrings; the README has the tables), by the rule: the best
# MRR@10 there, within 0.01, then the best recall@5. The questions written by hand are
# held out: the rule does not read them. With the local WordLlama, this (0.780 recall@5,
# 0.633 MRR@10 on the synonym half; 0.477 and 0.353 on the written) beat what it replaced,
# RRF_K 60 with meaning at 0.5 and the question as asked (0.750, 0.598; 0.424, 0.325): with
# 60, the first ranks of either side count barely more than the 30th, so fusing mostly
# broke full text's ties.
RRF_K = 10
WEIGHT_WORDS = 1.0
WEIGHT_MEANING = 1.0
CANDIDATES = 30  # asked of each index before fusing
# Words that shape a question but say nothing of what it asks about. Left in, they are
# rare in documents, so full text ranks a chunk that happens to say "how" or "I" high, and
# a static model's vector (a mean of its words') drifts toward them. Nouns that may be a
# question's subject ("will": a will may be what is asked about) are not in it.
QUESTION_WORDS = frozenset(
    """a an the how what which who when where why do does did i me my we our you your is
    are was be can could should would to of in on for and or it this that there way""".split()
)
MAX_LIMIT = 20
# Why a passage was found, in the context panel's words: full text, vectors, and the local
# model's word matching (late_interaction.py: among the best matches of the question's words).
REASONS = {
    "words": "same words",
    "meaning": "similar meaning",
    "close words": "words close in meaning",
}
DEFAULT_MODE = "auto"


@dataclass
class Passage:
    """One ranked passage of a user's document."""

    document_id: int
    chunk: int
    name: str
    text: str
    score: float
    found_by: list[str] = field(default_factory=list)  # REASONS' keys
    where: dict[str, Any] = field(default_factory=dict)  # chunk, heading, page, lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "name": self.name,
            "chunk": self.chunk + 1,
            "text": self.text,
            "score": round(self.score, 6),
            "found_by": self.found_by,
            "where": self.where,
        }

    @property
    def key(self) -> str:
        """The passage as "document:chunk", as a chat's `left_out_passages` names it."""
        return passage_key(self.document_id, self.chunk)

    @property
    def reason(self) -> str:
        """Why it was found, in the context panel's words."""
        return " and ".join(REASONS.get(kind, kind) for kind in self.found_by) or REASONS["words"]

    @property
    def source(self) -> str:
        """The document and where in it, as the model and the panel read it."""
        where = self.where
        bits = [self.name]
        if where.get("heading"):
            bits.append(str(where["heading"]))
        if where.get("page"):
            bits.append(f"page {where['page']}")
        if where.get("lines"):
            bits.append(f"lines {where['lines'][0]}–{where['lines'][1]}")
        if len(bits) == 1:
            return f"{self.name} (chunk {self.chunk + 1})"
        return " › ".join(bits)


def passage_key(document_id: int, chunk: int) -> str:
    """A passage's name in a chat's `left_out_passages`: its document and chunk (from 0)."""
    return f"{int(document_id)}:{int(chunk)}"


def left_out_keys(settings: dict[str, Any]) -> set[str]:
    """The passages a chat leaves out of its requests (the context panel's Leave out)."""
    return {k for k in settings.get("left_out_passages") or () if isinstance(k, str)}


@dataclass
class Found:
    """What a search found, and how it searched."""

    passages: list[Passage]
    mode: str  # "hybrid" or "full_text"
    note: str | None = None  # why meaning search (or the reranker) was not used, when it was not
    reranked: bool = False  # ordered by the user's reranker (numi/knowledge/rerank.py)
    # What ordered the fused passages besides: "reranker" (the user's, as `reranked`),
    # "local" (the local model's word matching, numi/knowledge/late_interaction.py) or None.
    ranked_by: str | None = None


def retrieve(
    user_id: int,
    query: str,
    *,
    limit: int = 5,
    attachment_ids: list[int] | None = None,
    project: Project | None = None,
) -> Found:
    """The best passages of the user's documents (or of `attachment_ids` only) for `query`;
    in a `project` (its files, its chats), the query's vector is made by the project's own
    embedding model when it chose one, as its files' vectors were."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    asked = without_question_words(query)
    words = search(user_id, asked, limit=CANDIDATES, attachment_ids=attachment_ids)
    meaning: list[tuple[int, int, float]] = []
    mode, note = "full_text", None
    embedder = embedder_for(user_id, project) if vector_backend() else None
    if embedder is not None and attachment_ids != [] and query.strip():
        try:
            vector = embedder.embed([asked])[0]
            meaning = nearest(
                user_id, embedder.name, vector, limit=CANDIDATES, attachment_ids=attachment_ids
            )
            mode = "hybrid"
        except NumiError as exc:
            note = f"Full-text only for now: {exc.message}"
    elif embedder is None:
        note = "Full-text only: no embedding model (Settings → Documents)."
    scores, found_by = fuse(
        [(h["attachment_id"], h["chunk"]) for h in words], [(a, n) for a, n, _ in meaning]
    )
    order = sorted(scores, key=lambda key: (-scores[key], key))
    reranked, ranked_by, rows = False, None, {}
    if len(order) > 1 and rerank.choice(db.session.get(User, user_id)) is not None:
        order, rerank_note = _reranked(user_id, query, order)
        reranked, note = rerank_note is None, rerank_note or note
        ranked_by = "reranker" if reranked else None
    elif len(order) > 1 and mode == "hybrid" and embedder and embedder.name == LOCAL_MODEL:
        # No reranker endpoint: the local model's words matched one by one (issue 37).
        order, rows = _word_matched(user_id, asked, order, scores, found_by, limit)
        ranked_by = "local"
    best = order[:limit]
    rows = {key: rows[key] for key in best if key in rows}
    rows |= chunk_rows(user_id, [key for key in best if key not in rows])
    passages = [
        Passage(
            document_id=key[0],
            chunk=key[1],
            name=rows[key]["name"],
            text=rows[key]["text"],
            score=scores[key],
            found_by=found_by[key],
            where=rows[key]["where"],
        )
        for key in best
        if key in rows
    ]
    return Found(passages, mode, note, reranked, ranked_by)


def _word_matched(
    user_id: int,
    asked: str,
    order: list[tuple[int, int]],
    scores: dict[tuple[int, int], float],
    found_by: dict[tuple[int, int], list[str]],
    limit: int,
) -> tuple[list[tuple[int, int]], dict[tuple[int, int], dict[str, Any]]]:
    """The fused `order` with the local model's word matching of its best fused in
    (numi/knowledge/late_interaction.py), computed in the CPU pool, and the rows it read;
    the `limit` best matches are found by "close words" too."""
    counted = order[: late_interaction.IDF_CANDIDATES]
    rows = chunk_rows(user_id, counted)
    counted = [key for key in counted if key in rows]
    texts = [f"{rows[key]['name']} {rows[key]['text']}" for key in counted]
    matched = min(late_interaction.RERANK_CANDIDATES, len(counted))
    said = late_interaction.words(asked)
    query_words = [w for w in said if w not in QUESTION_WORDS] or said
    match = run_cpu(
        late_interaction.match_scores, local_model(), query_words, texts[:matched], texts
    )
    order, by_match = late_interaction.rerank(order, scores, dict(zip(counted, match)))
    for key in by_match[:limit]:  # why found: among the best matches of its words
        found_by[key].append("close words")
    return order, rows


def _reranked(
    user_id: int, query: str, order: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], str | None]:
    """The fused order with its first RERANK_CANDIDATES ordered by the user's reranker, and
    None; or the fused order as it was and why, when the reranker failed."""
    candidates = order[: rerank.RERANK_CANDIDATES]
    rows = chunk_rows(user_id, candidates)
    candidates = [key for key in candidates if key in rows]
    try:
        relevance = rerank.scores(user_id, query, [rows[key]["text"] for key in candidates])
    except NumiError as exc:
        return order, f"Not reranked: {exc.message}"
    by_key = dict(zip(candidates, relevance))
    return sorted(candidates, key=lambda key: -by_key[key]), None  # stable: ties keep fused order


def without_question_words(query: str) -> str:
    """The query without its QUESTION_WORDS, as both indexes are asked it; the query as it
    is when nothing else is left ("What is this?"). A word in capitals stays: "WHO" and "IT"
    are names, not question words."""

    def asks(word: str) -> bool:
        bare = re.sub(r"\W+", "", word)
        return bare.lower() in QUESTION_WORDS and not (len(bare) > 1 and bare.isupper())

    kept = [w for w in query.split() if not asks(w)]
    return " ".join(kept) or query


def fuse(
    words: list[tuple[int, int]],
    meaning: list[tuple[int, int]],
    weights: tuple[float, float] = (WEIGHT_WORDS, WEIGHT_MEANING),
    k: int = RRF_K,
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], list[str]]]:
    """Two rankings of (document, chunk), best first, fused by weighted reciprocal rank:
    each chunk's score, and which rankings found it (bench/retrieval_quality.py tunes the
    weights and `k` with this same function)."""
    scores: dict[tuple[int, int], float] = {}
    found_by: dict[tuple[int, int], list[str]] = {}
    for weight, kind, keys in ((weights[0], "words", words), (weights[1], "meaning", meaning)):
        for rank, key in enumerate(keys, 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            found_by.setdefault(key, []).append(kind)
    return scores, found_by


# --- a chat's documents ----------------------------------------------------------------------


def _shown_messages(column: Any, user_id: int, chat_id: str, *where: Any) -> Select:
    """`column` of the shown messages of one of this user's chats (owner-scoped), with
    `where` besides."""
    return (
        select(column)
        .join(Chat, Chat.id == Message.chat_id)
        .where(Message.chat_id == chat_id, Chat.user_id == user_id, Message.shown(), *where)
    )


# Built once (every turn of every chat asks). Most questions have parts (their request's
# metadata) and few an attachment: the LIKE leaves the others unread and unparsed, which
# in a long chat was thousands of rows per turn; the parts are still checked below.
_ATTACHMENT_PARTS = _shown_messages(
    Message.content_parts_json,
    bindparam("user_id"),
    bindparam("chat_id"),
    Message.content_parts_json.like("%attachment%"),
)


def chat_attachment_ids(user_id: int, chat_id: str) -> list[int]:
    """Attachments referenced by the shown messages of one of this user's chats."""
    ids: list[int] = []
    parts = db.session.execute(
        _ATTACHMENT_PARTS, {"user_id": user_id, "chat_id": chat_id}
    ).scalars()
    for raw in parts:
        for part in json.loads(raw or "[]"):
            if (
                isinstance(part, dict)
                and part.get("type") == "attachment"
                and isinstance(part.get("id"), int)
            ):
                ids.append(part["id"])
    return list(dict.fromkeys(ids))


def chat_project(user_id: int, chat_id: str) -> Project | None:
    """The chat's project, if it has one (scoped to the owner)."""
    return db.session.execute(
        select(Project)
        .join(Chat, Chat.project_id == Project.id)
        .where(Chat.id == chat_id, Chat.user_id == user_id, Project.user_id == user_id)
    ).scalar_one_or_none()


# "The caller has not looked the chat's project up": None is a chat without one.
_LOOK_UP: Any = object()


def project_attachment_ids(user_id: int, chat_id: str, project: Any = _LOOK_UP) -> list[int]:
    """The files of the chat's project: a chat in a project searches them as its own.
    `project`, when the caller has it from `chat_project`, saves looking it up again."""
    if project is _LOOK_UP:
        project = chat_project(user_id, chat_id)
    return project_file_ids(user_id, project.id if project else None)


def chat_documents(user_id: int, chat_id: str, project: Any = _LOOK_UP) -> list[int]:
    """The documents a chat has: its attachments with text, and its project's files
    (`project` as for `project_attachment_ids`)."""
    return _with_text(
        user_id,
        chat_attachment_ids(user_id, chat_id) + project_attachment_ids(user_id, chat_id, project),
    )


def _with_text(user_id: int, ids: list[int]) -> list[int]:
    """Those of `ids` that are the user's and have text to search, in order, once each."""
    if not ids:
        return []
    with_text = set(
        db.session.execute(
            select(Attachment.id).where(
                Attachment.id.in_(ids),
                Attachment.user_id == user_id,
                Attachment.extracted_text.is_not(None),
            )
        ).scalars()
    )
    return [i for i in dict.fromkeys(ids) if i in with_text]


def use_documents(settings: dict[str, Any], project: Project | None) -> str:
    """The chat's "Use documents": its own setting, else its project's, else automatically."""
    for value in (
        settings.get("use_documents"),
        (project.settings if project else {}).get("use_documents"),
    ):
        if value in USE_DOCUMENTS:
            return value
    return DEFAULT_MODE


def newest_question(user_id: int, chat_id: str) -> str:
    """The text of the chat's newest shown question: what its next request answers."""
    content = db.session.execute(
        _shown_messages(Message.content, user_id, chat_id, Message.role == "user")
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar()
    return content or ""


def chat_passages(
    user_id: int, chat_id: str, settings: dict[str, Any], project: Any = _LOOK_UP
) -> Found | None:
    """The passages the chat's next request carries, or None (not automatic, no documents,
    or no question yet). `project` as for `project_attachment_ids`: a caller that knows
    the chat has none passes None."""
    if project is _LOOK_UP:
        project = chat_project(user_id, chat_id)
    if use_documents(settings, project) != "auto":
        return None
    # The project looked up once per turn: every turn of every chat asks (issue 45).
    documents = chat_documents(user_id, chat_id, project)
    question = newest_question(user_id, chat_id) if documents else ""
    return passages_for(user_id, question, documents, settings, project)


def project_passages(user_id: int, project: Project, question: str) -> Found | None:
    """The passages a request to the project carries that is in no chat yet (an API
    client's call to `project/<name>`): as a new chat of the project would get them for
    `question`, by the project's "Use documents". Scoped to the project's owner."""
    if project.user_id != user_id or use_documents({}, project) != "auto":
        return None
    documents = _with_text(user_id, project_file_ids(user_id, project.id))
    return passages_for(user_id, question if documents else "", documents, {}, project)


def passages_for(
    user_id: int,
    question: str,
    documents: list[int],
    settings: dict[str, Any],
    project: Project | None = None,
) -> Found | None:
    """The best passages of `documents` (of a chat in `project`, or of the project's files)
    for `question` within the context's budget, but those `settings` leave out; None when
    there are none (or no question)."""
    question = question.strip()
    if not documents or not question:
        return None
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    ensure_indexed(app, user_id, documents)  # a document not indexed yet joins later
    config = app.config
    wanted = config["NUMI_DOCUMENTS_CONTEXT_PASSAGES"]
    left_out = left_out_keys(settings)
    found = retrieve(
        user_id, question[:2000], limit=min(MAX_LIMIT, wanted + len(left_out)),
        attachment_ids=documents, project=project,
    )  # fmt: skip
    budget = config["NUMI_DOCUMENTS_CONTEXT_TOKENS"] * 4  # characters, at about 4 a token
    kept, used = [], 0
    for passage in found.passages:
        if passage.key in left_out:
            continue  # the user left it out in the context panel: the next best comes instead
        if len(kept) == wanted:
            break
        if used + len(passage.text) > budget and kept:
            break
        kept.append(passage)
        used += len(passage.text)
    found.passages = kept
    return found if kept else None


def system_text(found: Found) -> str:
    """The passages as the system context's part: numbered, so the model can cite them."""
    lines = [
        "Passages from the user's documents, found for their newest question. Use them when "
        "they answer it, and cite each one you use by its number, as [1]. The model may "
        "call search_documents for more, when that tool is on.",
    ]
    for n, passage in enumerate(found.passages, 1):
        lines.append(f"[{n}] {passage.source}\n{passage.text}")
    return "\n\n".join(lines)
