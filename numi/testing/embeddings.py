"""The scripted provider's embedding and rerank routes, as OpenAI-compatible servers speak them:

- `POST /v1/embeddings` (`model`, `input`: a text or a list of texts) answers
  `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`: a
  deterministic vector per text, `ScriptedProvider.embedding_dim` long, made from its words
  (each word, lowercased and with a plural `s` dropped, adds ±1 at places its hash picks;
  then unit length). Texts sharing words get close vectors; it is no model of meaning.
- `POST /v1/rerank` (`model`, `query`, `documents`) answers llama.cpp's shape,
  `{results: [{index, relevance_score}]}`: the share of the query's words each document has.

`ScriptedProvider.embedding_failures` holds scenarios (`http_error(...)`) answered, one per
request, before any vector: a test makes the endpoint rate-limit or fail with them. These
requests are recorded in `ScriptedProvider.embedding_requests`, apart from the model calls.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

ROUTES = ("/embeddings", "/rerank")
DEFAULT_DIM = 64


def words(text: str) -> list[str]:
    """The words the scripted vectors are made of."""
    found = re.findall(r"\w+", (text or "").lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in found]


def vector(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The scripted vector of `text`: unit length, the same for the same words."""
    values = [0.0] * dim
    for word in words(text):
        digest = hashlib.sha256(word.encode()).digest()
        for i in range(2):
            place = int.from_bytes(digest[4 * i : 4 * i + 4], "big") % dim
            values[place] += 1.0 if digest[8 + i] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def embeddings_body(body: Any, dim: int) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) for POST /embeddings."""
    texts = body.get("input") if isinstance(body, dict) else None
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return 400, {
            "error": {
                "message": "input must be a string or a list of strings",
                "type": "invalid_request_error",
            }
        }
    return 200, {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector(t, dim)}
            for i, t in enumerate(texts)
        ],
        "model": body.get("model") or "scripted-embedding",
        "usage": {"prompt_tokens": sum(len(words(t)) for t in texts), "total_tokens": 0},
    }


def rerank_body(body: Any) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) for POST /rerank."""
    if not isinstance(body, dict) or not isinstance(body.get("documents"), list):
        return 400, {
            "error": {"message": "documents must be a list", "type": "invalid_request_error"}
        }
    query = set(words(str(body.get("query") or "")))
    results = []
    for i, document in enumerate(body["documents"]):
        found = set(words(str(document)))
        results.append({"index": i, "relevance_score": len(query & found) / (len(query) or 1)})
    results.sort(key=lambda row: -row["relevance_score"])
    return 200, {"model": body.get("model"), "results": results}
