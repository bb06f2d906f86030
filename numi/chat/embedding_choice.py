"""An embedding model choice, checked before anything is saved: the user's (Settings →
Documents) and a project's own (its defaults: `settings.embedding`, issue 37).

A choice is "local" (the WordLlama of `numi[knowledge]`), "none" (full-text search only)
or {"endpoint_id", "model"}: an endpoint the user can see that speaks OpenAI's
`/v1/embeddings`, with a model named. It lives here, below numi/knowledge, because a
project's settings are cleaned in numi/chat/projects.py; numi/knowledge/embedding.py turns a
checked choice into vectors.
"""

from __future__ import annotations

from typing import Any

from .. import endpoints as endpoint_store
from ..errors import NumiError

LOCAL = "local"
NONE = "none"
EMBEDDING_KINDS = ("openai_chat", "openai_responses")  # the kinds that speak /v1/embeddings
MAX_MODEL_CHARS = 200


def from_form(value: Any, model: Any = None) -> Any:
    """A form's select ("local", "none", "endpoint:<id>") and model field as a choice to
    check: the select names an endpoint, the text field its model."""
    if isinstance(value, str) and value.startswith("endpoint:"):
        return {"endpoint_id": value.split(":", 1)[1], "model": model}
    return value


def validate_choice(user_id: int, value: Any, model: Any = None) -> Any:
    """A checked choice from a form or the API, raising `invalid_documents_settings` (400)
    for a malformed one and NotFound (404) for an endpoint the user cannot see; nothing is
    saved here."""
    value = from_form(value, model)
    if value in (LOCAL, NONE):
        return value
    if not isinstance(value, dict) or set(value) - {"endpoint_id", "model"}:
        raise NumiError(
            "invalid_documents_settings",
            'embedding must be "local", "none" or {"endpoint_id", "model"}.',
            400,
        )
    raw_id = value.get("endpoint_id")
    try:
        if isinstance(raw_id, bool):
            raise TypeError
        endpoint_id = int(raw_id)
    except (TypeError, ValueError):
        raise NumiError(
            "invalid_documents_settings", "endpoint_id must be a number.", 400
        ) from None
    endpoint = endpoint_store.get_endpoint(user_id, endpoint_id)  # someone else's: 404
    if endpoint.kind not in EMBEDDING_KINDS:
        raise NumiError(
            "invalid_documents_settings",
            "The embedding endpoint must speak OpenAI's API (/v1/embeddings).",
            400,
        )
    name = value.get("model")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_MODEL_CHARS:
        raise NumiError(
            "invalid_documents_settings",
            f"Name the embedding model (at most {MAX_MODEL_CHARS} characters), e.g. nomic-embed-text.",
            400,
        )
    return {"endpoint_id": endpoint.id, "model": name.strip()}


def is_choice(value: Any) -> bool:
    """Whether a stored value has a choice's shape (a project's settings may predate one)."""
    return value in (LOCAL, NONE) or (
        isinstance(value, dict) and isinstance(value.get("endpoint_id"), int)
    )
