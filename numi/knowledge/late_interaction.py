"""The local reranking step: the question's words matched one by one to the passages' words
by the local model's word vectors ("late interaction", as ColBERT does with its tokens, here
with WordLlama's static ones).

A static model's vector of a passage is the mean of its words': a paraphrase shares its
meaning with the passage but little of that mean, and full text needs the same words. Here
each of the question's words is compared with every word of a candidate passage and keeps
its best cosine ("drive" finds "disk" in a passage about disks however long it is); the
passage's score is those best cosines' mean, each word weighted by how rare it is among the
candidates (an IDF over the fused top IDF_CANDIDATES: a word every candidate holds tells them
apart least). The candidates ranked by that score are a third ranking, fused with the two
others' by reciprocal rank (`rerank`).

Chosen on the labelled set's synonym half (bench/retrieval_rerank.py; the README has the
table): word vectors rather than the tokens' (the tokenizer splits "misspelled" into pieces
that match anything), weighted by the candidates' IDF rather than equally, the fused best
RERANK_CANDIDATES, weight WEIGHT at k K. It is CPU work, a median of about 4 ms a search
with its words' token ids cached and 8 to 14 ms without (bench/retrieval_rerank.py):
`retrieval.retrieve` runs it in the CPU pool, only when the search's vectors are the local
model's and the user has no reranker endpoint (rerank.py), which comes first.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from typing import Any

RERANK_CANDIDATES = 20  # the fused best, ranked by word matching
IDF_CANDIDATES = 50  # the fused best whose words the IDF counts
WEIGHT = 3.0  # the word-matching ranking's weight in the fusion (the others' are 1)
K = 10  # and its k: WEIGHT / (K + rank)
# Words' token ids kept (the oldest dropped beyond it): about 150 bytes each, 2.5 MB full.
WORD_CACHE = 16384
_WORD = re.compile(r"\w\w+")  # one-letter words say nothing
_word_ids: dict[str, tuple[int, ...]] = {}
_cache_lock = threading.Lock()  # the CPU pool's threads share the cache


def words(text: str) -> list[str]:
    """The words of `text`, lower-cased, as they are matched (one-letter ones left out)."""
    return _WORD.findall(text.lower())


def _token_ids(tokenizer: Any, vocabulary: list[str]) -> list[tuple[int, ...]]:
    """Each word's token ids, from WORD_CACHE or tokenized now (the tokenizer costs about
    20 µs a word, most of a search's matching; a user's searches share most words)."""
    with _cache_lock:
        found = [_word_ids.get(word) for word in vocabulary]
    missing = [word for word, ids in zip(vocabulary, found) if ids is None]
    if missing:
        encoded = tokenizer.encode_batch(missing, add_special_tokens=False)
        # Padding is on for the model's batches: keep only each word's real tokens.
        made = {
            word: tuple(i for i, m in zip(e.ids, e.attention_mask) if m) or (0,)
            for word, e in zip(missing, encoded)
        }
        with _cache_lock:
            while len(_word_ids) + len(made) > WORD_CACHE and _word_ids:
                del _word_ids[next(iter(_word_ids))]  # the oldest first
            _word_ids.update(made)
        found = [ids if ids is not None else made[word] for word, ids in zip(vocabulary, found)]
    return found  # type: ignore[return-value]


def word_vectors(model: Any, vocabulary: list[str]) -> Any:
    """Unit-length float32 vectors of single words: the mean of each word's token rows of the
    model's matrix (as `LocalModel.embed` makes a text's), one row per word."""
    import numpy as np  # lazy: optional extra knowledge

    matrix = model.matrix
    if not vocabulary:
        return np.zeros((0, matrix.shape[1]), dtype=np.float32)
    token_ids = _token_ids(model.tokenizer, vocabulary)
    lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
    flat = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64)
    np.clip(flat, 0, matrix.shape[0] - 1, out=flat)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    summed = np.add.reduceat(matrix[flat].astype(np.float32), starts, axis=0)
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return summed / np.where(norms == 0, 1.0, norms)


def match_scores(
    model: Any, query_words: list[str], texts: list[str], counted: list[str]
) -> list[float]:
    """Each of `texts`' match to the question's words: the IDF-weighted mean, over the
    question's words, of each one's best cosine to a word of the text; the IDF counts the
    words of `counted` (the texts and the candidates after them)."""
    import numpy as np  # lazy: optional extra knowledge

    asked = list(dict.fromkeys(query_words))
    if not asked or not texts:
        return [0.0] * len(texts)
    held = [set(words(t)) for t in texts]
    counted_sets = held + [set(words(t)) for t in counted[len(texts) :]]
    n = len(counted_sets)
    weight = np.array(
        [
            math.log((n - df + 0.5) / (df + 0.5) + 1.0)
            for df in (sum(word in s for s in counted_sets) for word in asked)
        ]
    )
    vocabulary = sorted(set(asked).union(*held))
    position = {word: i for i, word in enumerate(vocabulary)}
    vectors = word_vectors(model, vocabulary)
    question = vectors[[position[w] for w in asked]]
    found = []
    for text_words in held:
        if not text_words:
            found.append(0.0)
            continue
        best = (question @ vectors[[position[w] for w in text_words]].T).max(axis=1)
        found.append(float((weight * best).sum() / weight.sum()))
    return found


def rerank(
    order: list[tuple[int, int]],
    scores: dict[tuple[int, int], float],
    matched: dict[tuple[int, int], float],
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The fused `order` with the word-matching ranking of the `matched` passages (each's
    `match_scores`, in fused order) fused in: each gains WEIGHT / (K + its rank by its
    match) in `scores` (changed in place, so a passage's score is what it is ordered by).
    Ties by key, as `retrieval.retrieve` orders. And the matched passages, best match first."""
    by_match = sorted(matched, key=lambda key: -matched[key])  # stable: ties in fused order
    for rank, key in enumerate(by_match, 1):
        scores[key] += WEIGHT / (K + rank)
    return sorted(order, key=lambda key: (-scores[key], key)), by_match
