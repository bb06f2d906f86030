"""Which model turns text into vectors for a user, and turning text into vectors with it.

Settings → Documents picks one (`User.documents["embedding"]`), and a project may pick its
own (`Project.settings["embedding"]`, checked in numi/chat/embedding_choice.py): its files'
vectors and its chats' questions use it.

- `"local"`: WordLlama, a static embedding model whose 16 MB of weights ship inside its wheel
  (`pip install 'numi[knowledge]'`). Numi reads the wheel's own weights and tokenizer files
  itself (`LocalModel`), not through WordLlama's `load()`, which can download and keeps a
  float32 copy: nothing is ever fetched at run time. Loading and embedding are
  CPU work: both run in the CPU pool (numi/cpu_pool.py), never on the hub.
- `{"endpoint_id", "model"}`: an endpoint's OpenAI-compatible `POST /v1/embeddings` (OpenAI,
  Ollama, llama.cpp's `--embeddings`, vLLM, LM Studio), through the endpoint's adapter.
- `"none"`: full-text search only.

Unset, it is the local model when its extra is installed, else none. Vectors need numpy
(the same extra) whatever makes them; without it search is full-text only and Settings says
why. A failure (endpoint down, rate limit, a dimension other than the model's vectors
already have) is a NumiError with a stable code (EMBEDDING_CODES): the indexer marks the document
pending with its message, and search goes on with full text.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..chat.embedding_choice import LOCAL, NONE, is_choice

# Re-exported: Settings → Documents checks with them, and rerank.py lists the same endpoints.
from ..chat.embedding_choice import EMBEDDING_KINDS as EMBEDDING_KINDS
from ..chat.embedding_choice import validate_choice as validate_choice
from ..cpu_pool import run_cpu
from ..errors import NumiError
from ..extensions import db
from ..models import Chat, Endpoint, Message, Project, ProjectFile, User
from ..services import services
from flask import current_app
from sqlalchemy import select
from ..providers.errors import ProviderError
from .. import endpoints as endpoint_store

log = logging.getLogger(__name__)

LOCAL_MODEL = "wordllama/l2_supercat-256"  # the name its vectors are recorded under
INSTALL_HINT = "pip install 'numi[knowledge]'"


# Vectors that could not be made now are a NumiError with one of these codes; full-text
# search goes on, and the indexer marks the document pending with the message.
EMBEDDING_CODES = (
    "embedding_rate_limited",
    "embedding_unreachable",
    "embedding_wrong_dimension",
    "embedding_failed",
    "embedding_endpoint_gone",
)


# What is installed does not change while the process runs, and find_spec stats every entry of
# the import path on each call: a turn over a 1,000-document project asked 2,000 times, which
# was 95 % of its retrieval's CPU. So each is found once per process.
@functools.cache
def extra_installed() -> bool:
    """Whether `numi[knowledge]`'s numpy is here (vectors need it, whatever makes them)."""
    return importlib.util.find_spec("numpy") is not None


@functools.cache
def local_installed() -> bool:
    """Whether the local model's package (WordLlama) is installed."""
    return extra_installed() and importlib.util.find_spec("wordllama") is not None


@dataclass(frozen=True)
class Embedder:
    """A model that turns texts into unit-length float32 vectors (a numpy array, one row per
    text). `name` is recorded with every vector it makes."""

    name: str
    label: str
    embed_batch: Callable[[list[str]], Any]

    def embed(self, texts: list[str]) -> Any:
        """Unit-length vectors for `texts` (rows in order). Raises a NumiError with one
        of EMBEDDING_CODES."""
        return self.embed_batch(texts)


def choice(user: User | None, project: Project | None = None) -> Any:
    """The choice in force: the project's own when it has one, else the user's saved one
    ("local", "none" or {endpoint_id, model}); unset, the local model when installed."""
    own = (project.settings or {}).get("embedding") if project is not None else None
    if is_choice(own):
        return own
    saved = (user.documents or {}).get("embedding") if user is not None else None
    if saved in (LOCAL, NONE) or isinstance(saved, dict):
        return saved
    return LOCAL if local_installed() else NONE


def name_of(chosen: Any) -> str | None:
    """The name vectors of a choice are (to be) recorded under, or None for full-text only;
    found without reaching any endpoint."""
    if not extra_installed():
        return None
    if chosen == LOCAL:
        return LOCAL_MODEL if local_installed() else None
    if isinstance(chosen, dict):
        return f"endpoint:{chosen.get('endpoint_id')}/{chosen.get('model')}"
    return None


def embedder_name(user_id: int, project: Project | None = None) -> str | None:
    """The name the vectors of the user's documents (of `project`'s files, with it) are
    (to be) recorded under, or None for full-text only."""
    return name_of(choice(db.session.get(User, user_id), project))


def embedder_for(user_id: int, project: Project | None = None) -> Embedder | None:
    """The embedder of the user's documents (of `project`'s files and its chats' questions,
    with it), or None for full-text only (none chosen, or the extra missing)."""
    if not extra_installed():
        return None
    chosen = choice(db.session.get(User, user_id), project)
    if chosen == LOCAL:
        return local_embedder() if local_installed() else None
    if isinstance(chosen, dict):
        return endpoint_embedder(user_id, chosen.get("endpoint_id"), str(chosen.get("model") or ""))
    return None


def document_project(user_id: int, attachment_id: int) -> Project | None:
    """The project of a document (`document_projects`), or None: its vectors are made with
    that project's model when it chose one."""
    return document_projects(user_id, [attachment_id]).get(attachment_id)


def document_projects(user_id: int, attachment_ids: list[int] | None = None) -> dict[int, Project]:
    """The project each of the user's documents (of `attachment_ids`, else all) belongs to:
    the project whose file it is, else the project of the chat whose message attached it
    (the first such message), so a project chat's own attachments are embedded with the
    project's model, as its questions are. Documents of no project are left out."""
    wanted = None if attachment_ids is None else {int(i) for i in attachment_ids}
    if wanted == set():
        return {}
    files = (
        select(ProjectFile.attachment_id, Project)
        .join(Project, Project.id == ProjectFile.project_id)
        .where(ProjectFile.user_id == user_id, Project.user_id == user_id)
    )
    if wanted is not None:
        files = files.where(ProjectFile.attachment_id.in_(wanted))
    found: dict[int, Project] = {int(a): p for a, p in db.session.execute(files).all()}
    if wanted is not None and wanted <= found.keys():
        return found
    attached = db.session.execute(
        select(Message.content_parts_json, Project)
        .join(Chat, Chat.id == Message.chat_id)
        .join(Project, Project.id == Chat.project_id)
        .where(
            Chat.user_id == user_id,
            Project.user_id == user_id,
            Message.content_parts_json.contains('"attachment"'),
        )
        .order_by(Message.id)
    ).all()
    for raw, project in attached:
        for part in json.loads(raw or "[]"):
            if not isinstance(part, dict) or part.get("type") != "attachment":
                continue
            attachment_id = part.get("id")
            if isinstance(attachment_id, int) and (wanted is None or attachment_id in wanted):
                found.setdefault(attachment_id, project)
    return found


def status_text(user: User, project: Project | None = None) -> str:
    """What Settings → Documents, a project's defaults and the context panel say about how
    documents are searched."""
    chosen = choice(user, project)
    if not extra_installed():
        return f"Full-text search only: meaning search needs {INSTALL_HINT}."
    if chosen == LOCAL and local_installed():
        return "Words and meaning: full-text search and the local model (WordLlama), fused."
    if chosen == LOCAL:
        return f"Full-text search only: the local model needs {INSTALL_HINT}."
    if isinstance(chosen, dict):
        return f"Words and meaning: full-text search and {chosen.get('model')}, fused."
    return "Full-text search only (no embedding model chosen)."


# --- the local model -------------------------------------------------------------------------


# WordLlama's wheel carries the weights as float16 (32,000 tokens × 256) and its tokenizer.
# WordLlama's own load() imports requests (for downloads Numi never makes) and keeps the
# matrix as a float32 copy, 32 MiB: together about 60 MiB of RSS. Numi reads the same two
# files itself and keeps the matrix in float16 (16 MiB), widening only the rows a batch
# uses. float16 -> float32 is exact, and the pooling below is WordLlama 0.4's own arithmetic
# in the same batches of 64, so the vectors are bit for bit those of WordLlama's embed()
# (tests/knowledge/test_local_model.py) and the vectors already stored stay valid.
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_BATCH = 64  # the batches of WordLlama's embed(), so the arithmetic is the same


def _wheel_file(parts: tuple[str, str]) -> Path:
    """A file shipped inside the wordllama package, found without importing it."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("wordllama is not installed")
    return Path(next(iter(spec.submodule_search_locations)), *parts)


class LocalModel:
    """WordLlama l2_supercat at 256 dimensions, read from its wheel (never downloaded)."""

    def __init__(self) -> None:
        from safetensors import safe_open  # lazy: optional extra knowledge (wordllama's)
        from tokenizers import Tokenizer  # lazy: optional extra knowledge (wordllama's)

        with safe_open(str(_wheel_file(_WEIGHTS)), framework="np") as weights:
            self.matrix = weights.get_tensor("embedding.weight")  # float16, as shipped
        self.tokenizer = Tokenizer.from_file(str(_wheel_file(_TOKENIZER)))
        self.tokenizer.enable_padding()
        self.tokenizer.no_truncation()

    def embed(self, texts: list[str]) -> Any:
        """Unit-length float32 vectors of `texts`, one row each."""
        import numpy as np  # lazy: optional extra knowledge

        vectors = np.empty((len(texts), self.matrix.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            encoded = self.tokenizer.encode_batch(
                texts[start : start + _BATCH], add_special_tokens=False
            )
            ids = np.array([e.ids for e in encoded], dtype=np.int32)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
            np.clip(ids, 0, self.matrix.shape[0] - 1, out=ids)
            # float16 rows times a float32 mask: numpy widens them to float32 exactly.
            summed = np.sum(self.matrix[ids] * mask[..., np.newaxis], axis=1, dtype=np.float32)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            vectors[start : start + len(encoded)] = pooled
        return vectors


def local_model() -> Any:
    """The loaded WordLlama of this process (loaded once, in the CPU pool)."""
    models = services().embedding_models
    if LOCAL_MODEL not in models:
        models[LOCAL_MODEL] = run_cpu(LocalModel)
    return models[LOCAL_MODEL]


def local_embedder() -> Embedder:
    """WordLlama from its wheel, run in the CPU pool."""

    def embed(texts: list[str]) -> Any:
        model = local_model()
        return run_cpu(_local_vectors, model, texts)

    return Embedder(LOCAL_MODEL, "Local model (WordLlama)", embed)


def _local_vectors(model: LocalModel, texts: list[str]) -> Any:
    return model.embed(texts)


# --- an endpoint's /v1/embeddings ------------------------------------------------------------


def endpoint_embedder(user_id: int, endpoint_id: Any, model: str) -> Embedder:
    """An endpoint's `/v1/embeddings` with `model`. A removed endpoint is an
    NumiError (`embedding_endpoint_gone`), raised when it is asked for vectors."""

    name = f"endpoint:{endpoint_id}/{model}"
    endpoint = db.session.get(Endpoint, endpoint_id) if isinstance(endpoint_id, int) else None
    if not endpoint_store.usable_by(endpoint, user_id):

        def gone(texts: list[str]) -> Any:
            raise NumiError(
                "embedding_endpoint_gone",
                "The embedding endpoint was removed or turned off: pick another in Settings → Documents.",
                409,
            )

        return Embedder(name, model, gone)
    assert endpoint is not None
    adapter = endpoint_store.endpoint_adapter(current_app, endpoint)
    label = f"{model} on {endpoint.name}"

    def embed(texts: list[str]) -> Any:

        try:
            rows = adapter.embed(model, texts)
        except ProviderError as exc:
            message = f"The embedding endpoint failed: {exc.message}"
            if exc.code == "rate_limited":
                raise NumiError("embedding_rate_limited", message, 429) from exc
            if exc.code in ("provider_unavailable", "provider_timeout"):
                raise NumiError("embedding_unreachable", message, 502) from exc
            raise NumiError("embedding_failed", message, 502) from exc
        if len(rows) != len(texts) or len({len(row) for row in rows}) > 1 or not rows[0]:
            raise NumiError(
                "embedding_wrong_dimension",
                f"{label} answered vectors of different lengths.",
                502,
            )
        return run_cpu(_unit_rows, rows)

    return Embedder(name, label, embed)


def _unit_rows(rows: list[list[float]]) -> Any:
    import numpy as np  # lazy: optional extra knowledge

    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


# --- Settings → Documents ----------------------------------------------------------------------


def save_choice(user: User, chosen: Any) -> None:
    """Store a checked choice (`validate_choice`) as the user's."""
    user.documents = {**(user.documents or {}), "embedding": chosen}
    db.session.commit()
