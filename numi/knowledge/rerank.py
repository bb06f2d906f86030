"""The optional reranking step: an endpoint's `POST /v1/rerank` reorders the fused candidates.

Settings → Documents may name a reranker (`User.documents["rerank"]`: `{"endpoint_id",
"model"}`, an OpenAI-kind endpoint whose server serves `/rerank`, as llama.cpp's
`--reranking`, vLLM, Jina and Infinity do; unset: none). `retrieval.retrieve` then sends the
query and its best RERANK_CANDIDATES fused passages and orders them by the relevance the
reranker gives. A reranker that fails (down, rate-limited, removed) changes nothing: the
fused order stands and the search's note says why. The request runs on the hub's
monkey-patched sockets; nothing is computed here.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app

from .. import endpoints as endpoint_store
from ..errors import NumiError
from ..extensions import db
from ..models import Endpoint, User
from ..providers.errors import ProviderError
from .embedding import EMBEDDING_KINDS

log = logging.getLogger(__name__)

RERANK_CANDIDATES = 20  # fused passages the reranker reorders


def choice(user: User | None) -> dict[str, Any] | None:
    """The user's reranker, {endpoint_id, model}, or None."""
    saved = (user.documents or {}).get("rerank") if user is not None else None
    return saved if isinstance(saved, dict) else None


def validate(user_id: int, value: Any, model: Any = None) -> dict[str, Any] | None:
    """A checked reranker from the form or the API: None (no reranking) or an endpoint of the
    user's (or shared) that speaks OpenAI's API, with a model name. Raises before anything is
    saved (`invalid_documents_settings`, or 404 for another user's endpoint)."""
    if isinstance(value, str) and value.startswith("endpoint:"):  # the form's select
        value = {"endpoint_id": value.split(":", 1)[1], "model": model}
    if value in (None, "", "none"):
        return None
    if not isinstance(value, dict) or set(value) - {"endpoint_id", "model"}:
        raise NumiError(
            "invalid_documents_settings", 'rerank must be null or {"endpoint_id", "model"}.', 400
        )
    try:
        endpoint_id = int(value.get("endpoint_id"))
    except (TypeError, ValueError):
        raise NumiError(
            "invalid_documents_settings", "The reranker's endpoint_id must be a number.", 400
        ) from None
    endpoint = endpoint_store.get_endpoint(user_id, endpoint_id)  # someone else's: 404
    name = value.get("model")
    if endpoint.kind not in EMBEDDING_KINDS:
        raise NumiError(
            "invalid_documents_settings",
            "The reranker's endpoint must speak OpenAI's API (/v1/rerank).",
            400,
        )
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 200:
        raise NumiError(
            "invalid_documents_settings",
            "Name the reranking model (at most 200 characters), e.g. bge-reranker-v2-m3.",
            400,
        )
    return {"endpoint_id": endpoint.id, "model": name.strip()}


def save(user: User, chosen: dict[str, Any] | None) -> None:
    """Store a checked reranker (`validate`) as the user's."""
    user.documents = {**(user.documents or {}), "rerank": chosen}
    db.session.commit()


def scores(user_id: int, query: str, texts: list[str]) -> list[float]:
    """The user's reranker's relevance of each text to `query`, in order. Raises NumiError
    (`rerank_failed`) when it cannot answer; returns [] when the user has none."""
    chosen = choice(db.session.get(User, user_id))
    if chosen is None or not texts:
        return []
    endpoint = db.session.get(Endpoint, chosen.get("endpoint_id"))
    if not endpoint_store.usable_by(endpoint, user_id):
        raise NumiError("rerank_failed", "The reranker's endpoint was removed or turned off.", 409)
    assert endpoint is not None
    adapter = endpoint_store.endpoint_adapter(current_app, endpoint)
    try:
        return adapter.rerank(str(chosen.get("model")), query, texts)
    except ProviderError as exc:
        log.info("reranker of user %s failed: %s", user_id, exc.code)
        raise NumiError("rerank_failed", f"The reranker failed: {exc.message}", 502) from exc
