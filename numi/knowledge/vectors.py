"""The vector index: nearest chunks to a query's vector, in the database the app has.

- SQLite: sqlite-vec, loaded from its wheel into every connection (numi/database.py), ranks
  the user's chunk vectors with `vec_distance_cosine` inside the query: an exact search, in
  C, over the user's (and the scope's) vectors of the one model. Where it cannot load (a
  Python whose sqlite3 cannot load extensions, as pyenv builds by default), the log says so
  once and numpy searches instead; without numpy either, search is full-text only.
- Elsewhere (PostgreSQL): an exact search in numpy in the CPU pool over the user's vectors,
  good up to about 50,000 chunks. The user's vectors of the model are read once into one
  matrix, kept per process (MATRICES_KEPT users) until their index changes. pgvector is
  not used yet (Debian's package for the test server does not install here).

Vectors are float32, unit length, stored as bytes with the model and dimension that made
them (`DocumentChunk`); only vectors of the query's model and dimension are compared.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import text

from ..cpu_pool import run_cpu
from ..extensions import db
from ..services import services
from .embedding import extra_installed

log = logging.getLogger(__name__)

SQLITE_VEC = "sqlite-vec"
NUMPY = "numpy"
MATRICES_KEPT = 8  # users' vector matrices kept per process for the numpy search


def vector_backend() -> str:
    """SQLITE_VEC, NUMPY or "" (no vector search here: full-text only), found once per
    database and process."""
    engine = db.engine
    cache = services().document_backends
    key = f"vectors:{engine.url}"
    if key not in cache:
        cache[key] = _detect(engine.dialect.name)
    return cache[key]


def _detect(dialect: str) -> str:
    if not extra_installed():
        return ""
    if dialect != "sqlite":
        return NUMPY
    try:
        version = db.session.execute(text("SELECT vec_version()")).scalar()
    except Exception as exc:
        # Python's sqlite3 built without loadable extensions (pyenv's default build, and
        # macOS's system Python) cannot load it: the exact search in numpy does the same work.
        db.session.rollback()
        log.warning(
            "sqlite-vec did not load (%s): document vectors are searched with numpy",
            str(exc).splitlines()[0][:200],
        )
        return NUMPY
    log.info("document vectors searched with sqlite-vec %s", version)
    return SQLITE_VEC


def as_bytes(vector: Any) -> bytes:
    """A vector as stored: float32 bytes."""
    import numpy as np  # lazy: optional extra knowledge

    return np.asarray(vector, dtype=np.float32).tobytes()


def _scope(params: dict[str, Any], attachment_ids: list[int] | None) -> str:
    if attachment_ids is None:
        return ""
    names = []
    for i, attachment_id in enumerate(attachment_ids[:500]):
        params[f"a{i}"] = int(attachment_id)
        names.append(f":a{i}")
    return f" AND c.attachment_id IN ({', '.join(names) or 'NULL'})"


def nearest(
    user_id: int,
    model: str,
    query: Any,
    *,
    limit: int,
    attachment_ids: list[int] | None = None,
) -> list[tuple[int, int, float]]:
    """(attachment id, chunk, cosine similarity) of this user's chunks nearest to `query`
    (a unit vector of `model`), best first; [] where there is no vector search."""
    kind = vector_backend()
    if not kind or attachment_ids == []:
        return []
    params: dict[str, Any] = {"uid": user_id, "model": model, "dim": int(len(query))}
    scope = _scope(params, attachment_ids)
    owned = (
        "FROM document_chunks c JOIN attachments a ON a.id = c.attachment_id "
        "WHERE c.user_id = :uid AND a.user_id = :uid AND c.model = :model AND c.dim = :dim "
        f"AND c.vector IS NOT NULL{scope}"
    )
    if kind == SQLITE_VEC:
        params.update(q=as_bytes(query), k=int(limit))
        rows = db.session.execute(
            text(
                "SELECT c.attachment_id, c.chunk, vec_distance_cosine(c.vector, :q) AS d "
                f"{owned} ORDER BY d LIMIT :k"
            ),
            params,
        ).all()
        return [(int(a), int(n), 1.0 - float(d)) for a, n, d in rows]
    keys, matrix = _user_matrix(user_id, model, int(len(query)))
    return run_cpu(_numpy_nearest, keys, matrix, query, int(limit), attachment_ids)


def _user_matrix(user_id: int, model: str, dim: int) -> tuple[Any, Any]:
    """(attachment id and chunk per row, the vectors as one matrix) of the user's chunks of
    this model, kept per process while the user's index does not change: reading every
    vector per query is what made the search slow (bench/retrieval.py)."""
    params = {"uid": user_id, "model": model, "dim": dim}
    stamp = tuple(
        db.session.execute(
            text(
                "SELECT (SELECT count(*) FROM document_chunks WHERE user_id = :uid "
                "AND model = :model AND dim = :dim AND vector IS NOT NULL), "
                "(SELECT max(updated_at) FROM document_index WHERE user_id = :uid)"
            ),
            params,
        ).one()
    )
    cache = services().vector_matrices
    key = (str(db.engine.url), user_id, model, dim)
    kept = cache.get(key)
    if kept is not None and kept[0] == stamp:
        return kept[1], kept[2]
    rows = db.session.execute(
        text(
            "SELECT c.attachment_id, c.chunk, c.vector FROM document_chunks c "
            "JOIN attachments a ON a.id = c.attachment_id WHERE c.user_id = :uid "
            "AND a.user_id = :uid AND c.model = :model AND c.dim = :dim AND c.vector IS NOT NULL"
        ),
        params,
    ).all()
    keys, matrix = run_cpu(_as_matrix, rows, dim)
    while len(cache) >= MATRICES_KEPT:
        cache.pop(next(iter(cache)))  # the oldest: a few users' matrices, not everyone's
    cache[key] = (stamp, keys, matrix)
    return keys, matrix


def _as_matrix(rows: list[Any], dim: int) -> tuple[Any, Any]:
    import numpy as np  # lazy: optional extra knowledge

    keys = np.asarray([(r[0], r[1]) for r in rows], dtype=np.int64).reshape(len(rows), 2)
    matrix = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32)
    return keys, matrix.reshape(len(rows), dim)


def _numpy_nearest(
    keys: Any, matrix: Any, query: Any, limit: int, attachment_ids: list[int] | None
) -> list[tuple[int, int, float]]:
    import numpy as np  # lazy: optional extra knowledge

    if not len(keys):
        return []
    scores = matrix @ np.asarray(query, dtype=np.float32)
    if attachment_ids is not None:
        scores = np.where(np.isin(keys[:, 0], attachment_ids), scores, -np.inf)
    top = np.argsort(-scores)[:limit]
    return [
        (int(keys[i, 0]), int(keys[i, 1]), float(scores[i])) for i in top if np.isfinite(scores[i])
    ]
