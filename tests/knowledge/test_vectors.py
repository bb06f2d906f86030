"""The vector index (issue 37), on each database's own: the nearest chunks come back best
first, equal to numpy's exact search, only of the query's model and dimension, only the
owner's, only of the scope's documents.

- SQLite with sqlite-vec: this Python's sqlite3 (a pyenv build, as CI's) cannot load
  extensions, so the app opens SQLite with `sqlean.dbapi2` (NUMI_SQLITE_MODULE; the
  `sqlean.py` wheel is a test dependency), as the README tells such a user to.
- SQLite with Python's own sqlite3: sqlite-vec where it loads, else one log line and numpy.
- PostgreSQL with pgvector, where the test server has it (skipped with the reason where not,
  as on CI's: Debian has no package of it), and without it (a database where the extension
  is not created): one log line and numpy.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid

import numpy as np
import pytest

from numi.extensions import db
from numi.knowledge import vectors
from numi.models import Attachment, DocumentChunk, User

LOADABLE = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
SQLITE_MODULE = "sqlean.dbapi2"
DIM = 16


def _user() -> int:
    user = User(username=f"v-{uuid.uuid4().hex[:6]}")
    db.session.add(user)
    db.session.commit()
    return user.id


def _document(user_id: int, model: str, matrix: np.ndarray) -> int:
    """A document of `user_id` whose chunks have the rows of `matrix` (made unit) as vectors
    of `model`, written as the indexer writes them (vectors.store_vectors)."""
    attachment = Attachment(
        user_id=user_id, filename="v.txt", mime="text/plain", size=1,
        sha256=uuid.uuid4().hex, storage_path="/nonexistent/v.txt", extracted_text="x",
    )  # fmt: skip
    db.session.add(attachment)
    db.session.commit()
    db.session.add_all(
        DocumentChunk(attachment_id=attachment.id, chunk=n, user_id=user_id)
        for n in range(len(matrix))
    )
    db.session.flush()
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    vectors.store_vectors(attachment.id, model, list(enumerate(unit.astype(np.float32))))
    db.session.commit()
    return attachment.id


def _exact(documents: dict[int, np.ndarray], query: np.ndarray, limit: int):
    """numpy's exact search over `documents` (id: unit rows): (id, chunk, similarity)."""
    found = [
        (a, n, float(np.dot(row, query)))
        for a, matrix in documents.items()
        for n, row in enumerate(matrix)
    ]
    return sorted(found, key=lambda item: -item[2])[:limit]


def _unit(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)).astype(np.float32)


def _assert_same(found, expected) -> None:
    assert [(a, n) for a, n, _ in found] == [(a, n) for a, n, _ in expected]
    assert np.allclose([s for *_, s in found], [s for *_, s in expected], atol=1e-5)


def _check_search(app, backend: str) -> None:
    """The search on `app` is `backend`'s and answers what numpy's exact search answers."""
    with app.app_context():
        assert vectors.vector_backend() == backend
        rng = np.random.default_rng(37)
        alice, bob = _user(), _user()
        query = _unit(rng.standard_normal(DIM))
        mine = {}
        for _ in range(3):
            matrix = _unit(rng.standard_normal((25, DIM)))
            mine[_document(alice, "m", matrix)] = matrix
        # Nearer than any of alice's own, but never compared: another model, another owner.
        twins = np.tile(query, (3, 1))
        _document(alice, "other", twins)
        _document(bob, "m", twins)
        short = _unit(rng.standard_normal((4, 8)))  # the same model at another dimension
        other_dim = _document(alice, "m", short)

        _assert_same(vectors.nearest(alice, "m", query, limit=10), _exact(mine, query, 10))
        first, _, third = mine
        scoped = {a: m for a, m in mine.items() if a in (first, third)}
        _assert_same(
            vectors.nearest(alice, "m", query, limit=7, attachment_ids=[first, third]),
            _exact(scoped, query, 7),
        )
        assert vectors.nearest(alice, "m", query, limit=5, attachment_ids=[]) == []
        found = vectors.nearest(alice, "m", short[2], limit=10)
        _assert_same(found, _exact({other_dim: short}, short[2], 10))
        assert found[0][:2] == (other_dim, 2)
        assert {a for a, _, _ in vectors.nearest(bob, "m", query, limit=10)} == set(
            a for a in db.session.execute(db.select(Attachment.id).filter_by(user_id=bob)).scalars()
        )


def _lines(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_sqlite_vec_through_the_configured_module(make_sqlite_app, caplog):
    with caplog.at_level(logging.INFO, "numi.knowledge.vectors"):
        app = make_sqlite_app(NUMI_SQLITE_MODULE=SQLITE_MODULE)
        _check_search(app, vectors.SQLITE_VEC)
    assert len(_lines(caplog, "searched with sqlite-vec")) == 1
    assert not _lines(caplog, "did not load")


def test_sqlite_with_pythons_own_module(sqlite_app, caplog):
    """sqlite-vec where this Python's sqlite3 can load it; here (pyenv) numpy, said once."""
    with caplog.at_level(logging.WARNING, "numi.knowledge.vectors"):
        backend = vectors.SQLITE_VEC if LOADABLE else vectors.NUMPY
        _check_search(sqlite_app, backend)
        with sqlite_app.app_context():
            assert vectors.vector_backend() == backend  # found once per database and process
    assert len(_lines(caplog, "sqlite-vec did not load")) == (0 if LOADABLE else 1)


def test_pgvector(pgvector_app, caplog):
    with caplog.at_level(logging.INFO, "numi.knowledge.vectors"):
        _check_search(pgvector_app, vectors.PGVECTOR)
    assert len(_lines(caplog, "searched with pgvector")) == 1
    assert not _lines(caplog, "pgvector is not used")


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_postgresql_without_the_extension(app, caplog):
    """The suite's PostgreSQL databases are migrated without the extension: numpy, one line."""
    with caplog.at_level(logging.INFO, "numi.knowledge.vectors"):
        _check_search(app, vectors.NUMPY)
    said = _lines(caplog, "pgvector is not used")
    assert len(said) == 1 and "searched with numpy" in said[0]
    with app.app_context():
        columns = db.session.execute(
            db.text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'document_chunks' AND column_name = 'embedding'"
            )
        ).all()
    assert columns == []  # the migration changed nothing here


def test_pgvector_column_is_filled_from_the_bytes_by_its_migration(pgvector_app):
    """A database that had vectors before this revision: the upgrade fills the column from
    the bytes, and the search finds what it found before."""
    from flask_migrate import downgrade, upgrade

    from numi.database import enable_migrations

    directory = enable_migrations(pgvector_app).directory
    with pgvector_app.app_context():
        rng = np.random.default_rng(38)
        alice = _user()
        matrix = _unit(rng.standard_normal((30, DIM)))
        doc = _document(alice, "m", matrix)
        query = _unit(rng.standard_normal(DIM))
        before = vectors.nearest(alice, "m", query, limit=8)
        _assert_same(before, _exact({doc: matrix}, query, 8))
        db.session.remove()
        downgrade(directory=directory, revision="19438234b55e")
        assert "embedding" not in _chunk_columns()
        upgrade(directory=directory)
        assert "embedding" in _chunk_columns()
        # Kept in the row: out of line, a search read each vector from TOAST (3 buffers).
        storage = db.session.execute(
            db.text(
                "SELECT attstorage FROM pg_attribute WHERE attname = 'embedding' "
                "AND attrelid = 'document_chunks'::regclass"
            )
        ).scalar()
        assert storage == "m"
        _assert_same(vectors.nearest(alice, "m", query, limit=8), before)


def _chunk_columns() -> set[str]:
    return set(
        db.session.execute(
            db.text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'document_chunks'"
            )
        ).scalars()
    )
