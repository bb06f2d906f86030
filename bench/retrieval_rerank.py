"""The local reranking step on the labelled set (issue 37): the question's words matched one
by one to the fused candidates' words by the local WordLlama's vectors ("late interaction",
numi/knowledge/late_interaction.py), fused with full text's and the vectors' rankings.

    python bench/retrieval_rerank.py [--set bench/retrieval_set.json]
                                     [--written bench/retrieval_written.json]

The set is indexed as bench/retrieval_quality.py does (its helpers), the queries without
their question words as `retrieve` asks them, and fused as configured. Then each variant
scores the fused best N: a question word's best cosine to a candidate's words (or the
tokenizer's tokens), averaged equally or weighted by an IDF (over all the set's chunks, which
a search does not have, or over the fused best 20, 30 or 50, which it does). The candidates
ordered by that score are a third ranking fused by reciprocal rank (weight w, k), or the
order itself ("alone"). recall@5 and MRR@10 on the words / synonyms / written halves and
the 200 generated. The same rule as the fusion's chooses on the synonym half only (the best
MRR@10 within 0.01, then the best recall@5); the written half is held out. The step as
shipped (`late_interaction.match_scores` and `rerank` with their constants) is its own row,
with its CPU a search; then the shipped step within small scopes (each question among its
module's documents), and pseudo-relevance feedback (full text asked again with the best
vector hits' rare words), alone and with the step, and document expansion (each chunk's
full-text row plus the words nearest to its vector). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import retrieval_quality as quality  # noqa: E402

FUSED = 30  # each side's candidates, as retrieval.CANDIDATES
NS = [10, 20, 30, 50]  # the fused best scored by matching
WEIGHTS = [0.5, 1.0, 2.0, 3.0]
KS = [5, 10, 30]
VARIANTS = [  # (unit, IDF over): None weighs every question word equally
    ("tokens", None),
    ("tokens", "all"),
    ("words", None),
    ("words", "all"),
    ("words", 20),
    ("words", 30),
    ("words", 50),
]
HALVES = {  # in quality.HEADINGS' order
    "generated": ("words", "paraphrase"),
    "words": ("words",),
    "synonyms": ("paraphrase",),
    "written": ("written",),
}


def idf(n: int, df: int) -> float:
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


class Scorer:
    """The matching scores of a variant, over the set's chunk texts."""

    def __init__(self, model, texts: dict) -> None:
        import numpy as np

        from numi.knowledge import late_interaction as li

        self.np, self.li, self.model = np, li, model
        matrix = model.matrix.astype(np.float32)
        self.tokens = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-6)
        self.word_sets = {key: set(li.words(text)) for key, text in texts.items()}
        self.token_sets = {key: np.unique(self._token_ids(text)) for key, text in texts.items()}
        vocabulary = sorted(set().union(*self.word_sets.values()))
        self.position = {w: i for i, w in enumerate(vocabulary)}
        self.vectors = li.word_vectors(model, vocabulary)
        self.n = len(texts)
        self.df_words: dict[str, int] = {}
        for held in self.word_sets.values():
            for w in held:
                self.df_words[w] = self.df_words.get(w, 0) + 1
        self.df_tokens = np.zeros(matrix.shape[0])
        for ids in self.token_sets.values():
            self.df_tokens[ids] += 1

    def _token_ids(self, text: str):
        import re

        encoded = self.model.tokenizer.encode(text, add_special_tokens=False)
        ids = [i for i, t in zip(encoded.ids, encoded.tokens) if re.search(r"\w", t)]
        return self.np.array(ids, dtype=self.np.int64)

    def scores(self, variant: tuple, query: str, order: list) -> dict:
        """The variant's score of each of `order`'s best max(NS) for `query`."""
        np, li = self.np, self.li
        from numi.knowledge.retrieval import QUESTION_WORDS

        unit, over = variant
        wanted = order[: max(NS)]
        if unit == "tokens":
            asked = self._token_ids(query)
            if not len(asked):
                return dict.fromkeys(wanted, 0.0)
            weight = (
                np.array([idf(self.n, d) for d in self.df_tokens[asked]])
                if over
                else np.ones(len(asked))
            )
            question = self.tokens[asked]
            rows = {key: self.tokens[self.token_sets[key]] for key in wanted}
        else:
            said = li.words(query)
            asked = [w for w in said if w not in QUESTION_WORDS] or said
            if not asked:
                return dict.fromkeys(wanted, 0.0)
            question = li.word_vectors(self.model, asked)
            if over is None:
                weight = np.ones(len(asked))
            elif over == "all":
                weight = np.array([idf(self.n, self.df_words.get(w, 0)) for w in asked])
            else:
                sets = [self.word_sets[key] for key in order[:over]]
                weight = np.array([idf(len(sets), sum(w in s for s in sets)) for w in asked])
            rows = {
                key: self.vectors[[self.position[w] for w in self.word_sets[key]]] for key in wanted
            }
        return {
            key: float((weight * (question @ rows[key].T).max(axis=1)).sum() / weight.sum())
            if len(rows[key])
            else 0.0
            for key in wanted
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default=str(Path(__file__).with_name("retrieval_set.json")))
    parser.add_argument(
        "--written", default=str(Path(__file__).with_name("retrieval_written.json"))
    )
    args = parser.parse_args()
    labelled = json.loads(Path(args.set).read_text())
    written = json.loads(Path(args.written).read_text())["questions"]
    questions = labelled["questions"] + written

    from sqlalchemy import text

    from numi import create_app
    from numi.database import upgrade
    from numi.extensions import db
    from numi.knowledge import late_interaction as li
    from numi.knowledge.embedding import LocalModel
    from numi.knowledge.retrieval import QUESTION_WORDS, fuse, without_question_words

    directory = tempfile.mkdtemp(prefix="numi-retrieval-rerank-")
    app = create_app(
        {
            "NUMI_DATA_DIR": directory,
            "NUMI_DATABASE_URL": f"sqlite:///{directory}/bench.db",
            "NUMI_SECRET_KEY": "bench",
            "NUMI_AUTO_ENDPOINTS": False,
            "NUMI_LOG_LEVEL": "WARNING",
        }
    )
    upgrade(app)
    user_id, ids = quality.index_set(app, labelled)
    answers = quality.answer_keys(app, questions, ids)
    form = (without_question_words, without_question_words)
    ranked = quality.rankings(app, user_id, questions, form)
    with app.app_context():
        rows = db.session.execute(
            text("SELECT attachment_id, chunk, title, content FROM fts_document_chunks")
        ).all()
    texts = {(int(a), int(n)): f"{title or ''} {content}" for a, n, title, content in rows}
    kinds = [q["kind"] for q in questions]
    queries = [without_question_words(q["question"]) for q in questions]

    def fused(words: list, meaning: list) -> tuple[dict, list]:
        scores, _ = fuse(words[:FUSED], meaning[:FUSED])
        return scores, sorted(scores, key=lambda key: (-scores[key], key))

    base = [fused(w, m) for w, m, _ in ranked]

    def measured(ranks: list) -> dict:
        return {
            half: quality.scores([r for r, k in zip(ranks, kinds) if k in wanted])
            for half, wanted in HALVES.items()
        }

    def row(label: str, found: dict) -> None:
        cells = ["  ".join(f"{found[half][metric]:5.3f}" for half in HALVES) for metric in (0, 1)]
        print(f"{label:44} {cells[0]:>28}   {cells[1]:>28}")

    print(f"\n{'ranking':44} {'recall@5':>28}   {'MRR@10':>28}")
    print(f"{'':44} {quality.HEADINGS:>28}   {quality.HEADINGS:>28}")
    bm25 = [quality.rank_of(a, w[:FUSED]) for a, (w, _, _) in zip(answers, ranked)]
    row("full text (BM25) only", measured(bm25))
    row(
        "fused as configured", measured([quality.rank_of(a, o) for a, (_, o) in zip(answers, base)])
    )

    model = LocalModel()

    def shipped_order(query: str, order: list, scores: dict) -> list:
        """The fused order with the shipped step's word matching fused in, as retrieve does."""
        said = li.words(query)
        asked = [w for w in said if w not in QUESTION_WORDS] or said
        counted = order[: li.IDF_CANDIDATES]
        bodies = [texts[key] for key in counted]
        match = li.match_scores(model, asked, bodies[: li.RERANK_CANDIDATES], bodies)
        return li.rerank(order, scores, dict(zip(counted, match)))[0]

    scorer = Scorer(model, texts)
    grid = []
    for variant in VARIANTS:
        matches = [scorer.scores(variant, q, o) for q, (_, o) in zip(queries, base)]
        name = f"{variant[0]}, " + (f"IDF over {variant[1]}" if variant[1] else "equal")
        for n in NS:
            alone = [
                quality.rank_of(a, sorted(o[:n], key=lambda key: -c[key]))
                for a, (_, o), c in zip(answers, base, matches)
            ]
            grid.append((f"{name}, alone, {n}", measured(alone)))
            for weight, k in itertools.product(WEIGHTS, KS):
                ranks = []
                for a, (scores, order), c in zip(answers, base, matches):
                    scores = dict(scores)
                    by_match = sorted(order[:n], key=lambda key: -c[key])
                    for rank, key in enumerate(by_match, 1):
                        scores[key] += weight / (k + rank)
                    ranks.append(quality.rank_of(a, sorted(scores, key=lambda x: (-scores[x], x))))
                grid.append((f"{name}, {n}, w {weight}, k {k}", measured(ranks)))

    def choice(among: list) -> tuple:
        best = max(g[1]["synonyms"][1] for g in among)
        near = [g for g in among if g[1]["synonyms"][1] >= best - 0.01]
        return max(near, key=lambda g: (g[1]["synonyms"][0], g[1]["synonyms"][1]))

    print("\neach variant's choice on the synonym half (the written half held out):")
    for variant in VARIANTS:
        name = f"{variant[0]}, " + (f"IDF over {variant[1]}" if variant[1] else "equal")
        label, found = choice([g for g in grid if g[0].startswith(name + ",")])
        row(label, found)
    chosen = choice(grid)
    print(f"\nchosen among all {len(grid)}: {chosen[0]}")
    best_written = max(grid, key=lambda g: g[1]["written"][0])
    print(f"best written recall@5, for reference only (not a choice): {best_written[0]}")
    row("  that one", best_written[1])

    # The step as shipped, with its CPU a search (word vectors made per search, as retrieve).
    shipped, spent = [], []
    for a, query, (scores, order) in zip(answers, queries, base):
        scores = dict(scores)
        said = li.words(query)
        asked = [w for w in said if w not in QUESTION_WORDS] or said
        counted = order[: li.IDF_CANDIDATES]
        bodies = [texts[key] for key in counted]
        matched = min(li.RERANK_CANDIDATES, len(counted))
        started = time.process_time()
        match = li.match_scores(model, asked, bodies[:matched], bodies)
        spent.append((time.process_time() - started) * 1000)
        shipped.append(quality.rank_of(a, li.rerank(order, scores, dict(zip(counted, match)))[0]))
    print()
    row(
        f"as shipped: words, IDF over {li.IDF_CANDIDATES}, {li.RERANK_CANDIDATES}, "
        f"w {li.WEIGHT}, k {li.K}",
        measured(shipped),
    )
    print(
        f"CPU of match_scores a search, words' token ids cached: median "
        f"{statistics.median(spent):.1f} ms, p95 {sorted(spent)[int(len(spent) * 0.95)]:.1f} ms"
    )
    cold = []
    for query, (_, order) in zip(queries[:50], base[:50]):
        li._word_ids.clear()  # as a process's first search: every word tokenized
        bodies = [texts[key] for key in order[: li.IDF_CANDIDATES]]
        started = time.process_time()
        li.match_scores(model, li.words(query), bodies[: li.RERANK_CANDIDATES], bodies)
        cold.append((time.process_time() - started) * 1000)
    print(f"  with none cached (50 searches): median {statistics.median(cold):.1f} ms")

    # Small scopes (a chat's few documents): each question searched among its module's
    # documents only, the whole index's rankings cut to them (so at most ASKED a side).
    module = {key[0]: text.split(".", 1)[0] for key, text in texts.items()}
    rows_of: dict[str, list] = {"fused as configured": [], "as shipped": []}
    sizes = []
    for a, query, (words, meaning, _) in zip(answers, queries, ranked):
        scope = {d for d, name in module.items() if name == module[a[0]]}
        scores, order = fused(
            [k for k in words if k[0] in scope], [k for k in meaning if k[0] in scope]
        )
        sizes.append(len(order))
        rows_of["fused as configured"].append(quality.rank_of(a, order))
        rows_of["as shipped"].append(quality.rank_of(a, shipped_order(query, order, scores)))
    print(
        f"\neach question among its module's documents only (median "
        f"{statistics.median(sizes):.0f} fused candidates):"
    )
    for label, ranks in rows_of.items():
        row(label, measured(ranks))

    # Pseudo-relevance feedback (issue 37's third idea): full text asked again with the
    # query's words plus the TERMS rarest words of the vectors' best FEEDBACK chunks (words in
    # at most a fifth of the chunks, not the query's), fused with the vectors as configured,
    # then with the shipped step on top.
    print("\npseudo-relevance feedback (full text asked again with the vectors' best hits' words):")
    held = {key: set(li.words(text)) for key, text in texts.items()}
    frequency: dict[str, int] = {}
    for words_of in held.values():
        for word in words_of:
            frequency[word] = frequency.get(word, 0) + 1
    with app.app_context():
        from numi.knowledge.index import search

        for feedback, terms in itertools.product((2, 3, 5), (3, 5, 10)):
            fused_ranks, stepped = [], []
            for a, query, (_, meaning, _) in zip(answers, queries, ranked):
                said = li.words(query)
                weight: dict[str, float] = {}
                for key in meaning[:feedback]:
                    for word in held[key] - set(said) - QUESTION_WORDS:
                        if frequency[word] < len(held) / 5:
                            gain = math.log(len(held) / frequency[word])
                            weight[word] = weight.get(word, 0.0) + gain
                extra = sorted(weight, key=lambda w: (-weight[w], w))[:terms]
                hits = search(user_id, f"{query} {' '.join(extra)}", limit=FUSED)
                scores, order = fused([(h["attachment_id"], h["chunk"]) for h in hits], meaning)
                fused_ranks.append(quality.rank_of(a, order))
                stepped.append(quality.rank_of(a, shipped_order(query, order, scores)))
            row(f"fused, feedback {feedback} hits, {terms} terms", measured(fused_ranks))
            row("  and the shipped step", measured(stepped))

    # Document expansion (issue 37's second idea): each chunk's full-text row gets the
    # EXPANSION words of the tokenizer's vocabulary (whole words of 3 letters or more)
    # nearest to the chunk's vector, so that full text matches a paraphrase's words. Done
    # here by rewriting the bench's own rows (Numi would need a column for them); the step's
    # matching reads the chunks' own texts.
    print("\ndocument expansion (each chunk's full-text row plus its vector's nearest words):")
    vocabulary = sorted(
        {
            token[1:].lower()
            for token in model.tokenizer.get_vocab()
            if token.startswith("\u2581") and token[1:].isalpha() and len(token) > 3
        }
    )
    nearest_words = li.word_vectors(model, vocabulary)
    keys = list(texts)
    similarity = model.embed([texts[key] for key in keys]) @ nearest_words.T
    with app.app_context():
        own = {
            (int(a), int(n)): content
            for a, n, content in db.session.execute(
                text("SELECT attachment_id, chunk, content FROM fts_document_chunks")
            ).all()
        }
        for expansion in (5, 10, 20):
            added_characters = 0
            for i, key in enumerate(keys):
                added = " ".join(vocabulary[j] for j in (-similarity[i]).argsort()[:expansion])
                added_characters += len(added) + 1
                db.session.execute(
                    text(
                        "UPDATE fts_document_chunks SET content = :c "
                        "WHERE attachment_id = :a AND chunk = :n"
                    ),
                    {"c": f"{own[key]}\n{added}", "a": key[0], "n": key[1]},
                )
            db.session.commit()
            words_only, fused_ranks, stepped = [], [], []
            for a, query, (_, meaning, _) in zip(answers, queries, ranked):
                hits = search(user_id, query, limit=FUSED)
                words_found = [(h["attachment_id"], h["chunk"]) for h in hits]
                words_only.append(quality.rank_of(a, words_found))
                scores, order = fused(words_found, meaning)
                fused_ranks.append(quality.rank_of(a, order))
                stepped.append(quality.rank_of(a, shipped_order(query, order, scores)))
            grown = added_characters / sum(len(own[key]) for key in keys)
            print(f"{expansion} words a chunk (the rows' text {grown:.0%} longer):")
            row("  full text (BM25) only", measured(words_only))
            row("  fused as configured", measured(fused_ranks))
            row("  and the shipped step", measured(stepped))


if __name__ == "__main__":
    main()
