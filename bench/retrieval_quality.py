"""Retrieval quality on the labelled set (issue 37): recall@5 and MRR@10 of full text (BM25)
alone, vectors alone (the local WordLlama, as itself) and the two fused, for the questions
in the documents' words, the synonym-swapped ones and the ones written by hand apart.

    python bench/retrieval_quality.py [--set bench/retrieval_set.json]
                                      [--written bench/retrieval_written.json] [--database URL]
                                      [--max-ranked N]

The documents of bench/retrieval_set.json (bench/retrieval_set.py) are stored as one user's
attachments and indexed by Numi's own indexer (chunks, full text, vectors), on a temporary
SQLite database unless --database is given. Its 200 generated questions are half in the
documents' words ("words") and half paraphrased by a synonym table ("synonyms");
bench/retrieval_written.json adds questions written by hand in a user's words ("written").
Each question asks both indexes for their ASKED best chunks, as
`numi.knowledge.retrieval.retrieve` does, the rankings are cut to the fusion's candidates and
fused with `retrieval.fuse` itself. A question is answered at rank r when the chunk of its
document that holds its answer passage is r-th. recall@5: the share answered within 5;
MRR@10: the mean of 1/r for r <= 10, else 0. "generated" is the 200 generated questions,
the set the earlier rows were measured on. Printed, never asserted.

Tables: retrieval as configured (`retrieval.without_question_words`, `RRF_K`, the weights,
`CANDIDATES`), then as it was before this was tuned, then the grid of the queries' form
(as asked, or without question words), k, meaning's weight and candidates a side. The
configuration is the grid's choice by a rule that reads the synonym half only (the best
MRR@10 within 0.01, then the best recall@5); the written half is held out (tuning on it
would fit the fusion to the questions that test it).

The set's 554 chunks are fewer than a full-text search ranks at most
(numi.knowledge.full_text.MAX_RANKED), so each is ranked exactly as one bm25() query of all
its words; --max-ranked sets that bound lower, to measure the bounded ranking (rare words'
chunks, then the newest of the rest) at this set's size.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ASKED = 50  # each index's best chunks, fetched once (full text answers at most 50)
RRF_KS = [5, 10, 20, 30, 60]  # the fusion's k: weight / (k + rank)
WEIGHTS = [0.3, 0.5, 0.7, 1.0, 1.5, 2.0]  # meaning's weight, words' being 1
CANDIDATES = [10, 20, 30, 50]  # of each side's ranking, fused
KINDS = ("words", "paraphrase", "written")
HEADINGS = "gener. words  synon. written"


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


def answer_keys(app, questions: list[dict], ids: dict[str, int]) -> list[tuple[int, int]]:
    """The (attachment id, chunk) that holds each question's answer passage."""
    from numi.extensions import db
    from sqlalchemy import text

    keys = []
    with app.app_context():
        for question in questions:
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


def rankings(
    app,
    user_id: int,
    questions: list[dict],
    form: tuple[Callable[[str], str], Callable[[str], str]],
) -> list[tuple[list, list]]:
    """Each question's full-text and vector rankings of (attachment id, chunk), best first,
    ASKED long; full text searches `form[0](question)`, the vector is `form[1]`'s."""
    words_query, embed_query = form
    from numi.knowledge import embedding
    from numi.knowledge.index import search
    from numi.knowledge.vectors import nearest

    found = []
    with app.app_context():
        model = embedding.local_embedder()
        vectors = model.embed([embed_query(q["question"]) for q in questions])
        for question, vector in zip(questions, vectors):
            hits = search(user_id, words_query(question["question"]), limit=ASKED)
            meaning = nearest(user_id, model.name, vector, limit=ASKED)
            found.append(
                ([(h["attachment_id"], h["chunk"]) for h in hits], [(a, n) for a, n, _ in meaning])
            )
    return found


def rank_of(key, ranked: list) -> int | None:
    return ranked.index(key) + 1 if key in ranked else None


def scores(ranks: list[int | None]) -> tuple[float, float]:
    """(recall@5, MRR@10) of the ranks at which the questions were answered."""
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall, mrr


def fused_ranks(answers: list, ranked: list, setting: tuple) -> list[int | None]:
    """Each question's fused rank with `setting`: (k, meaning's weight, candidates a side)."""
    from numi.knowledge.retrieval import fuse

    k, meaning_weight, candidates = setting
    ranks = []
    for answer, (words, meaning) in zip(answers, ranked):
        fused, _ = fuse(words[:candidates], meaning[:candidates], (1.0, meaning_weight), k)
        ranks.append(rank_of(answer, sorted(fused, key=lambda key: (-fused[key], key))))
    return ranks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default=str(Path(__file__).with_name("retrieval_set.json")))
    parser.add_argument(
        "--written", default=str(Path(__file__).with_name("retrieval_written.json"))
    )
    parser.add_argument("--database", default=None)
    parser.add_argument("--max-ranked", type=int, default=None)
    args = parser.parse_args()
    if args.max_ranked:
        from numi.knowledge import full_text

        full_text.MAX_RANKED = args.max_ranked
    labelled = json.loads(Path(args.set).read_text())
    written = json.loads(Path(args.written).read_text())["questions"]
    names = {document["name"] for document in labelled["documents"]}
    missing = sorted({q["document"] for q in written} - names)
    if missing:  # a set made again with other documents leaves written questions unanswerable
        sys.exit(f"{args.written} asks about documents not in {args.set}: {', '.join(missing)}")
    questions = labelled["questions"] + written

    from numi import create_app
    from numi.database import upgrade
    from numi.knowledge import retrieval

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
    answers = answer_keys(app, questions, ids)
    with app.app_context():
        from numi.knowledge import embedding
        from numi.knowledge.vectors import vector_backend

        print(f"vectors searched with {vector_backend()}, model {embedding.local_embedder().name}")

    def as_asked(question: str) -> str:
        return question

    # How each index is asked: the question as it is, or without its question words.
    leave_out = retrieval.without_question_words
    forms = {
        "as asked": (as_asked, as_asked),
        "vector's without question words": (as_asked, leave_out),
        "without question words": (leave_out, leave_out),
    }
    ranked = {form: rankings(app, user_id, questions, f) for form, f in forms.items()}
    kinds = [q["kind"] for q in questions]
    print(
        f"{len(labelled['documents'])} documents; {kinds.count('words')} questions in the "
        f"documents' words, {kinds.count('paraphrase')} paraphrased by synonyms (together the "
        f"{kinds.count('words') + kinds.count('paraphrase')} generated), "
        f"{kinds.count('written')} written by hand"
    )
    halves = {"generated": ("words", "paraphrase"), "words": ("words",)}
    halves |= {"synonyms": ("paraphrase",), "written": ("written",)}

    def measured(ranks: list[int | None]) -> dict[str, tuple[float, float]]:
        return {
            half: scores([r for r, k in zip(ranks, kinds) if k in wanted])
            for half, wanted in halves.items()
        }

    def header(title: str) -> None:
        print(f"\n{title}")
        print(f"{'ranking':50} {'recall@5':>28}   {'MRR@10':>28}")
        print(f"{'':50} {HEADINGS:>28}   {HEADINGS:>28}")

    def row(label: str, ranks: list[int | None]) -> None:
        found = measured(ranks)
        cells = ["  ".join(f"{found[half][metric]:5.3f}" for half in halves) for metric in (0, 1)]
        print(f"{label:50} {cells[0]:>28}   {cells[1]:>28}")

    def table(title: str, form: str, setting: tuple) -> None:
        header(title)
        k, weight, candidates = setting
        words_ranks = [rank_of(a, w[:candidates]) for a, (w, _) in zip(answers, ranked[form])]
        meaning_ranks = [rank_of(a, m[:candidates]) for a, (_, m) in zip(answers, ranked[form])]
        row("full text (BM25) only", words_ranks)
        row("vectors (WordLlama) only", meaning_ranks)
        row(f"fused, k {k}, meaning {weight}", fused_ranks(answers, ranked[form], setting))

    configured = (
        retrieval.RRF_K,
        retrieval.WEIGHT_MEANING / retrieval.WEIGHT_WORDS,
        retrieval.CANDIDATES,
    )
    table(
        f"As configured: queries without question words, k {configured[0]}, meaning "
        f"{configured[1]}, {configured[2]} candidates a side",
        "without question words",
        configured,
    )
    table(
        "As before: queries as asked, k 60, meaning 0.5, 30 candidates a side",
        "as asked",
        (60, 0.5, 30),
    )

    # The grid, and the rule that chose the configuration, on the synonym half only: the
    # best MRR@10 within 0.01, then the best recall@5. The written half is held out.
    grid = []
    for form in forms:
        for setting in itertools.product(RRF_KS, WEIGHTS, CANDIDATES):
            found = measured(fused_ranks(answers, ranked[form], setting))
            grid.append((form, setting, found))
    best_mrr = max(found["synonyms"][1] for _, _, found in grid)
    chosen = max(
        (g for g in grid if g[2]["synonyms"][1] >= best_mrr - 0.01),
        key=lambda g: (g[2]["synonyms"][0], g[2]["synonyms"][1]),
    )
    header(
        f"The grid's {len(grid)} fusions (queries {' / '.join(forms)}; k {RRF_KS}; meaning "
        f"{WEIGHTS}; candidates {CANDIDATES}), best 15 on the synonym half by MRR@10; "
        "the written half held out"
    )
    grid.sort(key=lambda g: (-g[2]["synonyms"][1], -g[2]["synonyms"][0]))
    for form, (k, weight, candidates), found in grid[:15]:
        row(
            f"{form}, k {k}, meaning {weight}, {candidates}",
            fused_ranks(answers, ranked[form], (k, weight, candidates)),
        )
    form, setting, found = chosen
    print(
        f"\nchosen by the rule on the synonym half: {form}, k {setting[0]}, meaning "
        f"{setting[1]}, {setting[2]} candidates (synonyms recall@5 {found['synonyms'][0]:.3f}, "
        f"MRR@10 {found['synonyms'][1]:.3f}; written, held out: {found['written'][0]:.3f}, "
        f"{found['written'][1]:.3f})"
        + (" = as configured" if (form, setting) == ("without question words", configured) else "")
    )
    form, setting, found = max(grid, key=lambda g: g[2]["written"][0])
    print(
        f"the grid's best written recall@5, for reference only (not a choice): "
        f"{found['written'][0]:.3f} ({form}, k {setting[0]}, meaning {setting[1]}, "
        f"{setting[2]} candidates; synonyms {found['synonyms'][0]:.3f})"
    )


if __name__ == "__main__":
    main()
