"""The vector index on SQLite (issue 37): sqlite-vec from its wheel where this Python's sqlite3
can load extensions; where it cannot (pyenv's default build, this machine's), one log line
and the exact search in numpy. Either way the nearest chunks come back best first, only of
the query's model and dimension, and only the owner's."""

from __future__ import annotations

import logging
import sqlite3
import uuid

import numpy as np

from numi.extensions import db
from numi.knowledge import vectors
from numi.models import Attachment, DocumentChunk, User

LOADABLE = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")


def _user() -> int:
    user = User(username=f"v-{uuid.uuid4().hex[:6]}")
    db.session.add(user)
    db.session.commit()
    return user.id


def _document(user_id: int, rows: list[tuple[str, int, list[float]]]) -> int:
    attachment = Attachment(
        user_id=user_id, filename="v.txt", mime="text/plain", size=1,
        sha256=uuid.uuid4().hex, storage_path="/nonexistent/v.txt", extracted_text="x",
    )  # fmt: skip
    db.session.add(attachment)
    db.session.commit()
    for chunk, (model, dim, values) in enumerate(rows):
        vector = np.asarray(values, dtype=np.float32)
        db.session.add(
            DocumentChunk(
                attachment_id=attachment.id,
                chunk=chunk,
                user_id=user_id,
                model=model,
                dim=dim,
                vector=vectors.as_bytes(vector / np.linalg.norm(vector)),
            )  # fmt: skip
        )
    db.session.commit()
    return attachment.id


def test_nearest_chunks_of_the_model_and_the_owner(sqlite_app, caplog):
    with sqlite_app.app_context(), caplog.at_level(logging.WARNING, "numi.knowledge.vectors"):
        backend = vectors.vector_backend()
        assert backend == (vectors.SQLITE_VEC if LOADABLE else vectors.NUMPY)
        assert vectors.vector_backend() == backend  # found once per database and process
        warnings = [r for r in caplog.records if "sqlite-vec did not load" in r.message]
        assert len(warnings) == (0 if LOADABLE else 1)

        alice, bob = _user(), _user()
        doc = _document(
            alice,
            [
                ("m", 3, [1, 0, 0]),
                ("m", 3, [0.6, 0.8, 0]),
                ("m", 3, [0, 0, 1]),
                ("other", 3, [1, 0.05, 0]),  # another model: never compared
            ],
        )
        _document(bob, [("m", 3, [1, 0.01, 0])])
        query = np.asarray([1, 0.1, 0], dtype=np.float32)
        query /= np.linalg.norm(query)
        found = vectors.nearest(alice, "m", query, limit=2)
        assert [(a, n) for a, n, _ in found] == [(doc, 0), (doc, 1)]
        assert found[0][2] > found[1][2] > 0.5
        assert vectors.nearest(alice, "m", query, limit=5, attachment_ids=[]) == []
        assert vectors.nearest(alice, "m", np.ones(4, dtype=np.float32) / 2, limit=5) == []
