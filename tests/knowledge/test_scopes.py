"""A search's scope is searched whole (issue 37): a project of more than 500 files once
searched only its first 500, by its words and by its vectors. And a scope is searched
before it is matched: another user's chunks, and the user's own outside the scope, never
come back, on both databases."""

from __future__ import annotations

import uuid

import numpy as np
from sqlalchemy import text

from numi.extensions import db
from numi.knowledge import vectors
from numi.knowledge.index import backend, fts_rowid, search
from numi.models import Attachment, DocumentChunk
from fixtures.users import index_one_chunk_each, owner

SCOPE = 520  # more than the 500 ids a scope was cut to


def _documents(user_id: int, texts: list[str]) -> list[int]:
    attachments = [
        Attachment(
            user_id=user_id,
            filename=f"note{i}.txt",
            mime="text/plain",
            size=len(body),
            sha256=uuid.uuid4().hex,
            storage_path="/nonexistent/note.txt",
            extracted_text=body,
        )  # fmt: skip
        for i, body in enumerate(texts)
    ]
    db.session.add_all(attachments)
    db.session.commit()
    # Indexed as the indexer leaves a one-chunk document (indexing 500 through it one by one
    # took a minute): its searchable text under its keyed rowid, and where it was found.
    index_one_chunk_each(user_id, [(a.id, a.filename, a.extracted_text) for a in attachments])
    db.session.add_all(
        DocumentChunk(attachment_id=a.id, chunk=0, user_id=user_id) for a in attachments
    )
    db.session.commit()
    return [a.id for a in attachments]


def _vectors(user_id: int, ids: list[int], best: int) -> None:
    """A vector of model "m" per document, the one of `best` nearest to (1, 0, 0)."""
    for attachment_id in ids:
        values = [1.0, 0.05, 0.0] if attachment_id == best else [0.2, 1.0, 0.0]
        vector = np.asarray(values, dtype=np.float32)
        db.session.execute(
            text(
                "UPDATE document_chunks SET model = 'm', dim = 3, vector = :v "
                "WHERE attachment_id = :a AND user_id = :u"
            ),
            {
                "v": vectors.as_bytes(vector / np.linalg.norm(vector)),
                "a": attachment_id,
                "u": user_id,
            },
        )
    db.session.commit()


def test_a_scope_of_more_than_500_documents_is_searched_whole(app):
    with app.app_context():
        alice, bob = owner("alice"), owner("bob")
        bodies = [f"Meeting notes number {i} about the garden shed." for i in range(SCOPE)]
        bodies[500] = "The quokka lives on Rottnest Island."  # the 501st of the scope
        ids = _documents(alice, bodies)
        outside = _documents(alice, ["Another quokka, in a document outside the scope."])
        foreign = _documents(bob, ["Bob's quokka is his own."])
        found = search(alice, "quokka", limit=10, attachment_ids=ids)
        assert [(h["attachment_id"], h["content"]) for h in found] == [
            (ids[500], "The quokka lives on Rottnest Island.")
        ]
        # The user's whole index finds the one outside the scope too, never Bob's.
        assert {h["attachment_id"] for h in search(alice, "quokka", limit=10)} == {
            ids[500],
            outside[0],
        }
        assert search(alice, "quokka", attachment_ids=foreign) == []
        # Another user's document named in a scope never takes a ranked place from hers,
        # even where it would rank first.
        loud = _documents(bob, ["Quokka quokka quokka, quokka."])
        assert [
            h["attachment_id"] for h in search(alice, "quokka", limit=1, attachment_ids=loud + ids)
        ] == [ids[500]]
        assert search(alice, "quokka", attachment_ids=[]) == []

        _vectors(alice, ids + outside, best=ids[500])
        _vectors(bob, foreign, best=foreign[0])
        query = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
        nearest = vectors.nearest(alice, "m", query, limit=3, attachment_ids=ids)
        assert nearest[0][:2] == (ids[500], 0)
        assert {a for a, _, _ in nearest} <= set(ids)
        assert vectors.nearest(alice, "m", query, limit=3, attachment_ids=foreign) == []


def test_the_migration_keys_existing_chunks_by_their_document(sqlite_app):
    """Chunks indexed before the keyed rowids are re-keyed by the migration, and found."""
    from flask_migrate import downgrade, upgrade

    from numi.database import enable_migrations

    with sqlite_app.app_context():
        if backend() != "fts5":
            return  # the plain table keeps its own ids
        directory = enable_migrations(sqlite_app).directory
        downgrade(directory=directory, revision="7f2b0c12e390")
        alice = owner("alice")
        [old] = _documents(alice, ["Notes"])
        db.session.execute(
            text(
                "INSERT INTO fts_document_chunks (rowid, title, content, attachment_id, user_id, "
                "chunk) VALUES (7, 'old.txt', 'An okapi in an old index.', :a, :u, 1)"
            ),
            {"a": old, "u": alice},
        )
        db.session.commit()
        assert search(alice, "okapi", attachment_ids=[old]) == []  # rowid 7 names no document
        upgrade(directory=directory)
        rowids = db.session.scalars(
            text("SELECT rowid FROM fts_document_chunks WHERE attachment_id = :a ORDER BY chunk"),
            {"a": old},
        ).all()
        assert rowids == [fts_rowid(old, 0), fts_rowid(old, 1)]
        [found] = search(alice, "okapi", attachment_ids=[old])
        assert (found["attachment_id"], found["chunk"]) == (old, 1)
