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

The grid also holds query-adaptive fusions (issue 37: a question in the documents' words
keeps full text's weight, a paraphrase leans on meaning), each weighing the two sides by
the query's *coverage*, evidence the search already has: the share of the query's words
(without question words) that full text's best COVERED_BY hits hold. "words x coverage":
reciprocal rank with full text's weight the coverage and meaning's a constant; "meaning
1+a(1-coverage)": full text's weight 1 and meaning's growing as coverage falls; "scores":
a score-based fusion, each chunk's BM25 over the best one's (times the coverage, or not)
plus meaning's weight times its cosine. Each has one or two parameters besides k and the
candidates, and the same rule chooses among them all; the CPU an adaptive fusion costs a
search beyond `retrieval.fuse` is printed.

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
COVERED_BY = 3  # full text's best hits whose words count toward a query's coverage
GROWTHS = [0.5, 1.0, 2.0, 3.0]  # a, in meaning's weight 1 + a(1 - coverage)
STEM = 5  # letters a query's word shares with a hit's word to count as found there


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


def coverage(query: str, hits: list[str]) -> float:
    """The share of `query`'s words (as full text searches them) that the texts of full
    text's best hits hold; a word counts as held when one of theirs shares its first STEM
    letters (a crude stem, as both backends stem: "returns" finds "return"). 0 without hits."""
    from numi.knowledge.full_text import query_words

    asked = query_words(query)
    if not asked or not hits:
        return 0.0
    held = {word[:STEM] for hit in hits for word in re.findall(r"\w+", hit.lower())}
    return sum(word[:STEM] in held for word in asked) / len(asked)


def rankings(
    app,
    user_id: int,
    questions: list[dict],
    form: tuple[Callable[[str], str], Callable[[str], str]],
) -> list[tuple[list, list, dict]]:
    """Each question's full-text and vector rankings of (attachment id, chunk), best first,
    ASKED long, and the evidence an adaptive fusion weighs them by (the query's coverage,
    each side's scores); full text searches `form[0](question)`, the vector is `form[1]`'s."""
    words_query, embed_query = form
    from numi.knowledge import embedding
    from numi.knowledge.index import search
    from numi.knowledge.vectors import nearest

    found = []
    with app.app_context():
        model = embedding.local_embedder()
        vectors = model.embed([embed_query(q["question"]) for q in questions])
        for question, vector in zip(questions, vectors):
            asked = words_query(question["question"])
            hits = search(user_id, asked, limit=ASKED)
            meaning = nearest(user_id, model.name, vector, limit=ASKED)
            texts = [f"{h['title'] or ''} {h['content']}" for h in hits[:COVERED_BY]]
            evidence = {
                "query": asked,
                "texts": texts,
                "coverage": coverage(asked, texts),
                # FTS5's bm25() is negative, best lowest; ts_rank_cd positive: both by size
                "bm25": [abs(h["score"]) for h in hits],
                "cosine": [similarity for _, _, similarity in meaning],
            }
            found.append(
                (
                    [(h["attachment_id"], h["chunk"]) for h in hits],
                    [(a, n) for a, n, _ in meaning],
                    evidence,
                )
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
    for answer, (words, meaning, _) in zip(answers, ranked):
        fused, _ = fuse(words[:candidates], meaning[:candidates], (1.0, meaning_weight), k)
        ranks.append(rank_of(answer, sorted(fused, key=lambda key: (-fused[key], key))))
    return ranks


def adaptive(rule: str, setting: tuple, words: list, meaning: list, evidence: dict) -> list:
    """One question's ranking by an adaptive `rule` (the module's docstring) with `setting`:
    (k, its parameter, candidates a side); "scores" has no k."""
    from numi.knowledge.retrieval import fuse

    k, parameter, candidates = setting
    words, meaning, cover = words[:candidates], meaning[:candidates], evidence["coverage"]
    if rule == "words x coverage":
        fused, _ = fuse(words, meaning, (cover, parameter), k)
    elif rule == "meaning 1+a(1-coverage)":
        fused, _ = fuse(words, meaning, (1.0, 1.0 + parameter * (1.0 - cover)), k)
    else:  # "scores" or "scores x coverage": BM25 over the best one's, plus weighted cosine
        weight = cover if rule == "scores x coverage" else 1.0
        best = evidence["bm25"][0] if evidence["bm25"] else 1.0
        fused = {}
        for key, score in zip(words, evidence["bm25"]):
            fused[key] = weight * score / best
        for key, similarity in zip(meaning, evidence["cosine"]):
            fused[key] = fused.get(key, 0.0) + parameter * similarity
    return sorted(fused, key=lambda key: (-fused[key], key))


def adaptive_ranks(answers: list, ranked: list, rule: str, setting: tuple) -> list[int | None]:
    """Each question's rank by an adaptive `rule` with `setting` (`adaptive`)."""
    return [
        rank_of(answer, adaptive(rule, setting, words, meaning, evidence))
        for answer, (words, meaning, evidence) in zip(answers, ranked)
    ]


def mean_coverage(ranked: list, kinds: list[str], half: str) -> float:
    """The mean coverage of one half's questions ("words", "synonyms", "written")."""
    kind = {"synonyms": "paraphrase"}.get(half, half)
    covers = [e["coverage"] for (_, _, e), k in zip(ranked, kinds) if k == kind]
    return sum(covers) / len(covers)


def adaptive_grid() -> list[tuple[str, tuple]]:
    """The adaptive fusions tried: (rule, (k, parameter, candidates))."""
    grid = [
        ("words x coverage", setting) for setting in itertools.product(RRF_KS, WEIGHTS, CANDIDATES)
    ]
    grid += [
        ("meaning 1+a(1-coverage)", setting)
        for setting in itertools.product(RRF_KS, GROWTHS, CANDIDATES)
    ]
    for rule in ("scores", "scores x coverage"):
        grid += [(rule, (0, weight, n)) for weight, n in itertools.product(WEIGHTS, CANDIDATES)]
    return grid


def adaptive_cpu(ranked: list, rule: str, setting: tuple) -> tuple[float, float]:
    """CPU µs a question, (`retrieval.fuse` as configured and sorted, the adaptive `rule`
    with its coverage counted again), over every question's rankings: what it adds to a
    search beyond the two indexes' own work."""
    from numi.knowledge.retrieval import CANDIDATES as configured, RRF_K, fuse

    def plain(words: list, meaning: list, evidence: dict) -> None:
        fused, _ = fuse(words[:configured], meaning[:configured], (1.0, 1.0), RRF_K)
        sorted(fused, key=lambda key: (-fused[key], key))

    def rule_of(words: list, meaning: list, evidence: dict) -> None:
        coverage(evidence["query"], evidence["texts"])
        adaptive(rule, setting, words, meaning, evidence)

    spent = []
    for run in (plain, rule_of):
        started = time.process_time()
        for _ in range(20):
            for words, meaning, evidence in ranked:
                run(words, meaning, evidence)
        spent.append((time.process_time() - started) / (20 * len(ranked)) * 1e6)
    return spent[0], spent[1]


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
        words_ranks = [rank_of(a, w[:candidates]) for a, (w, _, _) in zip(answers, ranked[form])]
        meaning_ranks = [rank_of(a, m[:candidates]) for a, (_, m, _) in zip(answers, ranked[form])]
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
    def label(form: str, setting: tuple) -> str:
        k, weight, candidates = setting
        return f"{form}, k {k}, meaning {weight}, {candidates}"

    def adaptive_label(rule: str, setting: tuple) -> str:
        k, parameter, candidates = setting
        named = "a" if rule.startswith("meaning") else "meaning"
        return f"{rule}, " + (f"k {k}, " if k else "") + f"{named} {parameter}, {candidates}"

    grid = []  # (label, ranks, what they measure, the adaptive rule or None)
    for form in forms:
        for setting in itertools.product(RRF_KS, WEIGHTS, CANDIDATES):
            ranks = fused_ranks(answers, ranked[form], setting)
            grid.append((label(form, setting), ranks, measured(ranks), None))
    adaptive_ranked = ranked["without question words"]
    for rule, setting in adaptive_grid():
        ranks = adaptive_ranks(answers, adaptive_ranked, rule, setting)
        grid.append((adaptive_label(rule, setting), ranks, measured(ranks), (rule, setting)))

    def choice(among: list) -> tuple:
        best_mrr = max(g[2]["synonyms"][1] for g in among)
        return max(
            (g for g in among if g[2]["synonyms"][1] >= best_mrr - 0.01),
            key=lambda g: (g[2]["synonyms"][0], g[2]["synonyms"][1]),
        )

    chosen = choice(grid)
    header(
        f"The grid's {len(grid)} fusions (queries {' / '.join(forms)}; k {RRF_KS}; meaning "
        f"{WEIGHTS}; candidates {CANDIDATES}; and the adaptive ones, queries without question "
        "words), best 15 on the synonym half by MRR@10; the written half held out"
    )
    grid.sort(key=lambda g: (-g[2]["synonyms"][1], -g[2]["synonyms"][0]))
    for name, ranks, _, _ in grid[:15]:
        row(name, ranks)
    print(
        f"\nchosen by the rule on the synonym half: {chosen[0]} (synonyms recall@5 "
        f"{chosen[2]['synonyms'][0]:.3f}, MRR@10 {chosen[2]['synonyms'][1]:.3f}; written, held "
        f"out: {chosen[2]['written'][0]:.3f}, {chosen[2]['written'][1]:.3f})"
        + (" = as configured" if chosen[0] == label("without question words", configured) else "")
    )
    best_written = max(grid, key=lambda g: g[2]["written"][0])
    print(
        f"the grid's best written recall@5, for reference only (not a choice): "
        f"{best_written[2]['written'][0]:.3f} ({best_written[0]}; synonyms "
        f"{best_written[2]['synonyms'][0]:.3f})"
    )

    # Each adaptive rule's own choice by the same rule, beside full text and vectors alone.
    header(
        f"Adaptive fusions (coverage: the query's words in full text's best {COVERED_BY} "
        "hits), each rule's choice on the synonym half; queries without question words"
    )
    plain = ranked["without question words"]
    row("full text (BM25) only", [rank_of(a, w[:ASKED]) for a, (w, _, _) in zip(answers, plain)])
    row("vectors (WordLlama) only", [rank_of(a, m[:ASKED]) for a, (_, m, _) in zip(answers, plain)])
    k, weight, candidates = configured
    row(
        f"as configured: k {k}, meaning {weight}, {candidates}",
        fused_ranks(answers, plain, configured),
    )
    rules = dict.fromkeys(rule for rule, _ in adaptive_grid())
    for rule in rules:
        name, ranks, _, (_, setting) = choice([g for g in grid if g[3] and g[3][0] == rule])
        row(name, ranks)
        before, after = adaptive_cpu(plain, rule, setting)
        print(
            f"{'':4}CPU a search: {after:.0f} µs with its coverage, against {before:.0f} µs "
            "for the configured fusion"
        )
    for half in ("words", "synonyms", "written"):
        print(f"coverage, mean on the {half} half: {mean_coverage(plain, kinds, half):.2f}")


if __name__ == "__main__":
    main()
