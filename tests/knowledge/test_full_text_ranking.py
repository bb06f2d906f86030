"""Full text over a large index (issue 37's scale rows): a search whose words are common ranks
a bounded few of its chunks (numi/knowledge/full_text.py), yet a rare word's passage is
never lost behind common ones, a small scope is ranked exactly, and another user's chunks
never surface, on both databases."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from numi.extensions import db
from numi.knowledge import full_text
from numi.knowledge.index import backend, search
from fixtures.users import index_one_chunk_each, owner

COMMON = "The garden water picture of the house, and the water by the garden."


def _documents(user_id: int, bodies: list[str]) -> list[int]:
    """One-chunk documents of the user, indexed as the indexer leaves them, oldest first."""
    before = db.session.execute(text("SELECT coalesce(max(id), 0) FROM attachments")).scalar()
    db.session.execute(
        text(
            "INSERT INTO attachments (user_id, filename, mime, size, sha256, storage_path, "
            "extracted_text, created_at) VALUES (:u, :name, 'text/plain', 1, :sha, "
            "'/nonexistent', :body, CURRENT_TIMESTAMP)"
        ),
        [
            {"u": user_id, "name": f"note{i}.txt", "sha": uuid.uuid4().hex, "body": body}
            for i, body in enumerate(bodies)
        ],
    )
    ids = list(
        db.session.execute(
            text("SELECT id FROM attachments WHERE user_id = :u AND id > :before ORDER BY id"),
            {"u": user_id, "before": before},
        ).scalars()
    )
    index_one_chunk_each(
        user_id, [(a, f"note{i}.txt", body) for i, (a, body) in enumerate(zip(ids, bodies))]
    )
    db.session.commit()
    return ids


def _every_match_ranked(user_id: int, query: str, limit: int, ids: list[int] | None = None):
    """FTS5's bm25() over every matching chunk of the user (of `ids`, if given): the ranking
    the bounded search must agree with where it says it is exact."""
    scope = "" if ids is None else " AND attachment_id IN (SELECT value FROM json_each(:ids))"
    rows = db.session.execute(
        text(
            "SELECT attachment_id, bm25(fts_document_chunks, 2.0, 1.0) AS score "
            "FROM fts_document_chunks WHERE fts_document_chunks MATCH :q AND user_id = :u"
            f"{scope} ORDER BY score, rowid DESC LIMIT :k"
        ),
        {
            "q": " OR ".join(f'"{w}"' for w in full_text.query_words(query)),
            "u": user_id,
            "k": limit,
            "ids": str(ids),
        },
    ).all()
    return [int(a) for a, _ in rows]


def test_a_rare_word_beside_common_ones_finds_its_passage_first(app):
    """More chunks hold the common words than a search ranks (MAX_RANKED): the rare word's
    passage, in her oldest document, still comes first, and Bob's, newer and louder, never."""
    with app.app_context():
        alice, bob = owner("alice"), owner("bob")
        [oldest] = _documents(alice, ["The okapi drinks garden water at dusk."])
        filler = _documents(alice, [COMMON] * (full_text.MAX_RANKED + 200))
        also = _documents(alice, ["An okapi picture, kept with the others."])
        foreign = _documents(bob, ["Okapi okapi: the okapi garden water okapi."] * 3)
        query = "the garden water okapi"
        found = search(alice, query, limit=5)
        ranked = [h["attachment_id"] for h in found]
        assert ranked[0] == oldest  # it holds the rare word and the most of the others
        assert set(ranked[:2]) == {oldest, also[0]}
        assert not set(ranked) & set(foreign)
        assert {h["attachment_id"] for h in search(bob, query, limit=50)} == set(foreign)
        # A query of common words only: the user's own chunks, as many as asked.
        common = search(alice, "garden water picture", limit=10)
        assert len(common) == 10 and {h["attachment_id"] for h in common} <= set(
            [oldest, *filler, *also]
        )
        if backend() == "fts5":
            # Where a rare word is asked, the bounded search is bm25() over every chunk.
            assert ranked == _every_match_ranked(alice, query, 5)
            assert [h["attachment_id"] for h in search(alice, query, limit=30)] == (
                _every_match_ranked(alice, query, 30)
            )


def test_a_scope_of_fewer_chunks_than_a_search_ranks_is_ranked_exactly(app):
    """A chat's few documents among many of common words: every matching chunk of the scope
    is ranked, in bm25()'s order, and a document of the chat's that is Bob's is not."""
    with app.app_context():
        alice, bob = owner("alice"), owner("bob")
        many = _documents(alice, [COMMON] * (full_text.MAX_RANKED + 50))
        chat = _documents(
            alice,
            [
                "Water the garden in the morning.",
                "A picture of the house by the water, the garden behind it.",
                "The garden, the garden, the water of the garden.",
                "Nothing about it here.",
            ],
        )
        foreign = _documents(bob, ["The garden water of the garden water garden."])
        scope = [many[0], *chat, *foreign]
        found = search(alice, "water the garden", limit=10, attachment_ids=scope)
        ids = [h["attachment_id"] for h in found]
        assert set(ids) == {many[0], *chat[:3]}
        if backend() == "fts5":
            assert ids == _every_match_ranked(alice, "water the garden", 10, scope)


def test_a_title_word_counts_double(app):
    """As FTS5's bm25(2.0, 1.0) weighs it, PostgreSQL's stored vector weighs the title."""
    with app.app_context():
        alice = owner("alice")
        ids = _documents(alice, ["Field notes: an okapi and more notes.", "Field notes."])
        db.session.execute(
            text(
                "UPDATE fts_document_chunks SET title = 'Okapi sightings' WHERE attachment_id = :a"
            ),
            {"a": ids[1]},
        )
        db.session.commit()
        assert [h["attachment_id"] for h in search(alice, "okapi")] == [ids[1], ids[0]]


BEFORE_STORED_VECTOR = "e6eb10fee5f9"


def test_the_stored_search_vector_is_made_for_existing_chunks(empty_database_url, tmp_path):
    """The migration (19438234b55e) fills the stored vector of chunks indexed before it, and
    swaps the expression index for the column's; its downgrade puts the expression back.
    SQLite's tables are left as they are, and both still find the chunk."""
    from flask_migrate import downgrade
    from flask_migrate import upgrade as alembic_upgrade

    from migration_support import app_at_revision

    app, directory = app_at_revision(empty_database_url, tmp_path, BEFORE_STORED_VECTOR)
    with app.app_context():
        alice = owner("alice")
        [document] = _documents(alice, ["An okapi seen by the river."])
        postgres = db.engine.dialect.name == "postgresql"

        def indexes() -> set[str]:
            return set(
                db.session.execute(
                    text("SELECT indexname FROM pg_indexes WHERE tablename = 'fts_document_chunks'")
                ).scalars()
            )

        alembic_upgrade(directory=directory)
        assert [h["attachment_id"] for h in search(alice, "okapi")] == [document]
        if postgres:
            vector = db.session.execute(
                text("SELECT search_vector::text FROM fts_document_chunks")
            ).scalar()
            assert "'okapi':3B" in vector and "'note0.txt':1A" in vector  # the title under A
            assert {"fts_document_chunks_search", "fts_document_chunks_owner"} <= indexes()
            assert "fts_document_chunks_tsv" not in indexes()
        db.session.commit()
        downgrade(directory=directory, revision=BEFORE_STORED_VECTOR)
        if postgres:
            assert "fts_document_chunks_tsv" in indexes()
            assert "fts_document_chunks_search" not in indexes()
            columns = db.session.execute(
                text(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'fts_document_chunks'"
                )
            ).scalars()
            assert "search_vector" not in set(columns)
        db.session.commit()
        alembic_upgrade(directory=directory)
        assert [h["attachment_id"] for h in search(alice, "okapi")] == [document]
