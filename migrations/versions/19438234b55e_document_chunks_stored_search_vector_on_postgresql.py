"""document chunks keep their search vector on PostgreSQL, the title weighted

PostgreSQL only (SQLite's FTS5 table and the plain table are unchanged): fts_document_chunks
gains `search_vector`, a stored generated tsvector (the title under weight A, the text under
B, so ts_rank_cd with weights {0.1, 0.2, 0.5, 1.0} counts a title word double, as FTS5's
bm25() does), and its GIN index replaces the expression index on
to_tsvector('english', title || ' ' || content): a search no longer recomputes each matching
row's vector to rank it. Scoping by user stays on the btree fts_document_chunks_owner
(user_id, attachment_id) that the table has had since c3d9e1f4a8b6. (A multi-column GIN of
user and vector would need btree_gin: PostgreSQL 15 ships it, but it is an extension each
database must create, for no measured gain.)

Revision ID: 19438234b55e
Revises: e6eb10fee5f9
Create Date: 2026-12-06 22:25:00

"""

from alembic import op


# revision identifiers, used by Alembic.
revision = "19438234b55e"
down_revision = "e6eb10fee5f9"
branch_labels = None
depends_on = None

# The schema changes on PostgreSQL only (tests/test_migrations.py reads this).
DIALECTS = ("postgresql",)

UP = [
    "ALTER TABLE fts_document_chunks ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
    "(setweight(to_tsvector('english', title), 'A') || "
    "setweight(to_tsvector('english', content), 'B')) STORED",
    "DROP INDEX IF EXISTS fts_document_chunks_tsv",
    "CREATE INDEX fts_document_chunks_search ON fts_document_chunks USING GIN (search_vector)",
]
DOWN = [
    "DROP INDEX IF EXISTS fts_document_chunks_search",
    "ALTER TABLE fts_document_chunks DROP COLUMN search_vector",
    "CREATE INDEX fts_document_chunks_tsv ON fts_document_chunks "
    "USING GIN (to_tsvector('english', title || ' ' || content))",
]


def upgrade():
    if op.get_bind().dialect.name in DIALECTS:
        for statement in UP:
            op.execute(statement)


def downgrade():
    if op.get_bind().dialect.name in DIALECTS:
        for statement in DOWN:
            op.execute(statement)
