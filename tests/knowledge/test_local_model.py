"""The local model read from WordLlama's wheel by Numi (numi/knowledge/embedding.py's
LocalModel) makes the vectors WordLlama's own load() and embed() make, bit for bit, so
vectors stored under LOCAL_MODEL before it stay valid; and it keeps the shipped float16
matrix rather than a float32 copy (the memory issue 37 budgets)."""

from __future__ import annotations

from pathlib import Path

from numi.knowledge.embedding import LocalModel

TEXTS = [
    "Photosynthesis happens in the chloroplast.",
    "How do green leaves make food from sunshine?",
    "The printing press spread books across Europe in the fifteenth century. " * 40,
    "naïve café — 東京 🚀",
    "x",
]


def test_vectors_are_wordllamas_own_bit_for_bit(require_extra):
    wordllama = require_extra("wordllama", "knowledge")
    import numpy as np

    theirs = wordllama.WordLlama.load(
        config="l2_supercat",
        dim=256,
        cache_dir=Path(wordllama.__file__).parent,
        disable_download=True,
    )
    ours = LocalModel()
    assert ours.matrix.dtype == np.float16 and ours.matrix.shape == (32000, 256)

    # More texts than one batch of 64, of different lengths, so padding differs per batch.
    texts = [f"{text} {n}" for n in range(30) for text in TEXTS]
    vectors = ours.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), 256)
    assert np.array_equal(vectors, theirs.embed(texts, norm=True))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert ours.embed([]).shape == (0, 256)
