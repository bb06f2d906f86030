"""The vector index: nearest chunks to a query's vector, in the database the app has.

- SQLite: sqlite-vec, loaded from its wheel into every connection (numi/database.py), ranks
  the user's chunk vectors with `vec_distance_cosine` inside the query: an exact search, in
  C, over the user's (and the scope's) vectors of the one model. Where it cannot load (a
  Python whose sqlite3 cannot load extensions, as pyenv builds by default, unless
  NUMI_SQLITE_MODULE names a module that can), the log says so once and numpy searches
  instead; without numpy either, search is full-text only.
- PostgreSQL with pgvector: chunks keep their vector twice, as bytes and in `embedding`, a
  column of pgvector's `vector` type that a migration adds where the extension was created
  (1f56dcefe889; no dimension in the type, as each model has its own), filled by
  `store_vectors` beside the bytes; `<=>` ranks them inside the query, exactly (no ANN
  index: see the README's measurement). A cast of the bytes at query time is not an option:
  PostgreSQL has no cast from bytea to a vector.
- Elsewhere (PostgreSQL without pgvector): an exact search in numpy in the CPU pool over the
  scope's vectors (a chat's or project's documents; the user's whole index without one),
  good up to about 50,000 chunks. They are read once into one matrix, kept per process
  (within MATRIX_BYTES_KEPT) until the index of those documents changes.

Which one a database has is found once per process and said in one log line.
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
from .scope import in_scope

log = logging.getLogger(__name__)

SQLITE_VEC = "sqlite-vec"
PGVECTOR = "pgvector"
NUMPY = "numpy"
# The vector matrices kept per process for the numpy search (users' and scopes'), oldest
# dropped first: 200,000 chunks of 256 dimensions are 200 MiB.
MATRIX_BYTES_KEPT = 256 * 1024 * 1024


def vector_backend() -> str:
    """SQLITE_VEC, PGVECTOR, NUMPY or "" (no vector search here: full-text only), found once
    per database and process."""
    engine = db.engine
    cache = services().document_backends
    key = f"vectors:{engine.url}"
    if key not in cache:
        cache[key] = _detect(engine.dialect.name)
    return cache[key]


def _detect(dialect: str) -> str:
    if not extra_installed():
        return ""
    if dialect == "postgresql":
        return _detect_pgvector()
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


def _detect_pgvector() -> str:
    version, available, column = db.session.execute(
        text(
            "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector'), "
            "EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = 'document_chunks' AND column_name = 'embedding')"
        )
    ).one()
    if version and column:
        log.info("document vectors searched with pgvector %s", version)
        return PGVECTOR
    if column or version:
        why = "the extension and Numi's column must both be there: see the README, Documents"
    elif available:
        why = "a superuser has not run CREATE EXTENSION vector in this database"
    else:
        why = "the server has no pgvector package"
    log.warning("pgvector is not used (%s): document vectors are searched with numpy", why)
    return NUMPY


def as_bytes(vector: Any) -> bytes:
    """A vector as stored: float32 bytes."""
    import numpy as np  # lazy: optional extra knowledge

    return np.asarray(vector, dtype=np.float32).tobytes()


def as_pgvector(vector: Any) -> str:
    """A vector as pgvector's text, '[0.1,-0.2,...]': 9 significant digits, so the float32
    read back is the one stored as bytes."""
    import numpy as np  # lazy: optional extra knowledge

    return "[" + ",".join("%.9g" % x for x in np.asarray(vector, dtype=np.float32).tolist()) + "]"


def store_vectors(attachment_id: int, model: str, vectors: list[tuple[int, Any]]) -> None:
    """Save a document's chunk vectors, (chunk number, vector) each, as made by `model`: the
    bytes, and on pgvector its column too. The caller commits."""
    if not vectors:
        return
    pgvector = vector_backend() == PGVECTOR
    rows = [
        {
            "a": attachment_id,
            "n": int(chunk),
            "model": model,
            "dim": int(len(vector)),
            "vector": as_bytes(vector),
            **({"embedding": as_pgvector(vector)} if pgvector else {}),
        }
        for chunk, vector in vectors
    ]
    column = ", embedding = CAST(:embedding AS vector)" if pgvector else ""
    db.session.execute(
        text(
            f"UPDATE document_chunks SET model = :model, dim = :dim, vector = :vector{column} "
            "WHERE attachment_id = :a AND chunk = :n"
        ),
        rows,
    )


def nearest(
    user_id: int,
    model: str,
    query: Any,
    *,
    limit: int,
    attachment_ids: list[int] | None = None,
) -> list[tuple[int, int, float]]:
    """(attachment id, chunk, cosine similarity) of this user's chunks nearest to `query`
    (a unit vector of `model`), best first, among `attachment_ids` (any number of them) when
    given; [] where there is no vector search."""
    kind = vector_backend()
    if not kind or attachment_ids == []:
        return []
    dim = int(len(query))
    params: dict[str, Any] = {"uid": user_id, "model": model, "dim": dim}
    scope = (
        ""
        if attachment_ids is None
        else " AND " + in_scope("c.attachment_id", params, attachment_ids)
    )
    if kind in (SQLITE_VEC, PGVECTOR):
        # The extension ranks inside the query: the cosine distance of each stored vector (the
        # bytes for sqlite-vec, the pgvector column for pgvector) to the query's.
        if kind == SQLITE_VEC:
            distance, column, value = "vec_distance_cosine(c.vector, :q)", "vector", as_bytes(query)
        else:
            distance, column, value = (
                "c.embedding <=> CAST(:q AS vector)",
                "embedding",
                as_pgvector(query),
            )
        params.update(q=value, k=int(limit))
        rows = db.session.execute(
            text(
                f"SELECT c.attachment_id, c.chunk, {distance} AS d "
                f"{_owned(bool(scope), column)}{scope} ORDER BY d LIMIT :k"
            ),
            params,
        ).all()
        return [(int(a), int(n), 1.0 - float(d)) for a, n, d in rows]
    keys, matrix = _matrix(params, scope, attachment_ids)
    return run_cpu(_numpy_nearest, keys, matrix, query, int(limit))


def _owned(scoped: bool, column: str = "vector") -> str:
    """The user's chunk vectors of one model (in `column`). With a scope they are read
    through the primary key, by document: the unary + keeps the planner off the (user,
    model) index, through which it read every chunk of the user to keep a chat's few."""
    user = "+c.user_id" if scoped else "c.user_id"
    return (
        "FROM document_chunks c JOIN attachments a ON a.id = c.attachment_id "
        f"WHERE {user} = :uid AND a.user_id = :uid AND c.model = :model AND c.dim = :dim "
        f"AND c.{column} IS NOT NULL"
    )


def _matrix(
    params: dict[str, Any], scope: str, attachment_ids: list[int] | None
) -> tuple[Any, Any]:
    """(attachment id and chunk per row, the vectors as one matrix) of the user's chunks of
    this model, of the scope's documents only when there is one: a chat of 40 documents
    reads and scores their chunks, not the user's whole index. Kept per process while the
    index of those documents does not change, within MATRIX_BYTES_KEPT: reading every vector
    per query is what made the search slow (bench/retrieval.py)."""
    documents = (
        ""
        if attachment_ids is None
        else " AND " + in_scope("i.attachment_id", params, attachment_ids)
    )
    # The state of those documents' index: every write of their chunks or vectors moves it.
    stamp = tuple(
        db.session.execute(
            text(
                "SELECT count(*), sum(i.embedded_chunks), max(i.updated_at) "
                f"FROM document_index i WHERE i.user_id = :uid{documents}"
            ),
            params,
        ).one()
    )
    cache = services().vector_matrices
    key = (
        str(db.engine.url), params["uid"], params["model"], params["dim"],
        None if attachment_ids is None else tuple(sorted(set(int(i) for i in attachment_ids))),
    )  # fmt: skip
    kept = cache.pop(key, None)
    if kept is None or kept[0] != stamp:
        rows = db.session.execute(
            text(f"SELECT c.attachment_id, c.chunk, c.vector {_owned(bool(scope))}{scope}"), params
        ).all()
        keys, matrix = run_cpu(_as_matrix, rows, params["dim"])
        kept = (stamp, keys, matrix)
    cache[key] = kept  # the newest last: the oldest go first
    while len(cache) > 1 and sum(m.nbytes for _, _, m in cache.values()) > MATRIX_BYTES_KEPT:
        cache.pop(next(iter(cache)))
    return kept[1], kept[2]


def _as_matrix(rows: list[Any], dim: int) -> tuple[Any, Any]:
    import numpy as np  # lazy: optional extra knowledge

    keys = np.asarray([(r[0], r[1]) for r in rows], dtype=np.int64).reshape(len(rows), 2)
    matrix = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32)
    return keys, matrix.reshape(len(rows), dim)


def _numpy_nearest(keys: Any, matrix: Any, query: Any, limit: int) -> list[tuple[int, int, float]]:
    import numpy as np  # lazy: optional extra knowledge

    if not len(keys):
        return []
    scores = matrix @ np.asarray(query, dtype=np.float32)
    count = min(int(limit), len(scores))
    top = np.argpartition(-scores, count - 1)[:count]  # the best few, then only they sorted
    top = top[np.argsort(-scores[top])]
    return [(int(keys[i, 0]), int(keys[i, 1]), float(scores[i])) for i in top]
