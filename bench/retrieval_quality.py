"""Retrieval quality on the labelled set (issue 37): recall@5 and MRR@10 of full text (BM25)
alone, vectors alone (the local WordLlama, as itself) and the two fused, over a grid of
fusion weights, overall and for the questions in the documents' words and the
paraphrased ones apart.

    python bench/retrieval_quality.py [--set bench/retrieval_set.json] [--database URL]
                                      [--max-ranked N]

The documents of bench/retrieval_set.json (bench/retrieval_set.py) are stored as one user's
attachments and indexed by Numi's own indexer (chunks, full text, vectors), on a temporary
SQLite database unless --database is given. Each question asks both indexes for their 30
best chunks, as `numi.knowledge.retrieval.retrieve` does, and the rankings are fused with
`retrieval.fuse` itself for each pair of weights. A question is answered at rank r when
the chunk of its document that holds its answer passage is r-th. recall@5: the share
answered within 5; MRR@10: the mean of 1/r for r <= 10, else 0. Printed, never asserted.

The set's 554 chunks are fewer than a full-text search ranks at most
(numi.knowledge.full_text.MAX_RANKED), so each is ranked exactly as one bm25() query of all
its words; --max-ranked sets that bound lower, to measure the bounded ranking (rare words'
chunks, then the newest of the rest) at this set's size.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CANDIDATES = 30
WEIGHTS = [(1.0, 0.0), (1.0, 0.3), (1.0, 0.4), (1.0, 0.5), (1.0, 0.6), (1.0, 0.7), (1.0, 0.8), (1.0, 1.0), (1.0, 1.5),
           (0.0, 1.0)]  # fmt: skip


def normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def index_set(app, labelled: dict) -> tuple[int, dict[str, int]]:
    """One user's attachments of the set, indexed (words and vectors); (user id, ids by name)."""
    from numi.extensions import db
    from numi.knowledge.index import ensure_indexed, wait_for_indexing
    from numi.models import Attachment, User

    with app.app_context():
        user = User(username="bench")
        db.session.add(user)
        db.session.commit()
        ids = {}
        for n, document in enumerate(labelled["documents"]):
            row = Attachment(
                user_id=user.id,
                filename=document["name"],
                mime="text/plain",
                size=len(document["text"]),
                sha256=f"{n:064x}",
                storage_path="bench",
                extracted_text=document["text"],
            )
            db.session.add(row)
            db.session.flush()
            ids[document["name"]] = row.id
        db.session.commit()
        user_id = user.id
        started = time.perf_counter()
        ensure_indexed(app, user_id)
        wait_for_indexing(app, timeout=3600)
        print(
            f"indexed {len(ids)} documents (words and local-model vectors) in "
            f"{time.perf_counter() - started:.0f} s"
        )
    return user_id, ids


def answer_keys(app, user_id: int, labelled: dict, ids: dict[str, int]) -> list[tuple[int, int]]:
    """The (attachment id, chunk) that holds each question's answer passage."""
    from numi.extensions import db
    from sqlalchemy import text

    keys = []
    with app.app_context():
        for question in labelled["questions"]:
            attachment_id = ids[question["document"]]
            chunks = db.session.execute(
                text(
                    "SELECT chunk, content FROM fts_document_chunks "
                    "WHERE attachment_id = :a ORDER BY chunk"
                ),
                {"a": attachment_id},
            ).all()
            wanted = normal(question["passage"])[:120]
            chunk = next(n for n, content in chunks if wanted in normal(content))
            keys.append((attachment_id, int(chunk)))
    return keys


def rankings(app, user_id: int, labelled: dict) -> list[tuple[list, list]]:
    """Each question's full-text and vector rankings of (attachment id, chunk), best first."""
    from numi.knowledge import embedding
    from numi.knowledge.index import search
    from numi.knowledge.vectors import nearest, vector_backend

    found = []
    with app.app_context():
        model = embedding.local_embedder()
        print(f"vectors searched with {vector_backend()}, model {model.name}")
        for question in labelled["questions"]:
            q = question["question"]
            words = [(h["attachment_id"], h["chunk"]) for h in search(user_id, q, limit=CANDIDATES)]
            meaning = nearest(user_id, model.name, model.embed([q])[0], limit=CANDIDATES)
            found.append((words, [(a, n) for a, n, _ in meaning]))
    return found


def rank_of(key, ranked: list) -> int | None:
    return ranked.index(key) + 1 if key in ranked else None


def scores(ranks: list[int | None]) -> tuple[float, float]:
    """(recall@5, MRR@10) of the ranks at which the questions were answered."""
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall, mrr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default=str(Path(__file__).with_name("retrieval_set.json")))
    parser.add_argument("--database", default=None)
    parser.add_argument("--max-ranked", type=int, default=None)
    args = parser.parse_args()
    if args.max_ranked:
        from numi.knowledge import full_text

        full_text.MAX_RANKED = args.max_ranked
    labelled = json.loads(Path(args.set).read_text())

    from numi import create_app
    from numi.database import upgrade
    from numi.knowledge.retrieval import fuse

    directory = tempfile.mkdtemp(prefix="numi-retrieval-quality-")
    app = create_app(
        {
            "NUMI_DATA_DIR": directory,
            "NUMI_DATABASE_URL": args.database or f"sqlite:///{directory}/bench.db",
            "NUMI_SECRET_KEY": "bench",
            "NUMI_AUTO_ENDPOINTS": False,
            "NUMI_LOG_LEVEL": "WARNING",
        }
    )
    upgrade(app)
    user_id, ids = index_set(app, labelled)
    answers = answer_keys(app, user_id, labelled, ids)
    ranked = rankings(app, user_id, labelled)
    kinds = [q["kind"] for q in labelled["questions"]]
    print(
        f"{len(labelled['documents'])} documents, {len(kinds)} questions "
        f"({kinds.count('words')} in the documents' words, {kinds.count('paraphrase')} paraphrased)"
    )
    print(f"{'ranking':28} {'recall@5':>24} {'MRR@10':>24}")
    print(f"{'':28} {'all  words  paraphr.':>24} {'all  words  paraphr.':>24}")

    def row(label: str, ranks: list[int | None]) -> None:
        cells = []
        for metric in (0, 1):
            values = [
                scores([r for r, k in zip(ranks, kinds) if kind in (None, k)])[metric]
                for kind in (None, "words", "paraphrase")
            ]
            cells.append("  ".join(f"{v:5.3f}" for v in values))
        print(f"{label:28} {cells[0]:>24} {cells[1]:>24}")

    row("full text (BM25) only", [rank_of(a, w) for a, (w, _) in zip(answers, ranked)])
    row("vectors (WordLlama) only", [rank_of(a, m) for a, (_, m) in zip(answers, ranked)])
    for weights in WEIGHTS[1:-1]:
        fused_ranks = []
        for answer, (words, meaning) in zip(answers, ranked):
            fused, _ = fuse(words, meaning, weights)
            order = sorted(fused, key=lambda key: (-fused[key], key))
            fused_ranks.append(rank_of(answer, order))
        row(f"fused, words {weights[0]} meaning {weights[1]}", fused_ranks)


if __name__ == "__main__":
    main()
