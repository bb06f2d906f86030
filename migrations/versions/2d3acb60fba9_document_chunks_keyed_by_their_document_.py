"""document chunks keyed by their document in full-text search

On SQLite with FTS5, each row of fts_document_chunks gets the rowid
`attachment_id << 20 | chunk` (numi/knowledge/index.py, `fts_rowid`), so that a search seeks
to the rowid range of its scope's documents instead of matching the query's words across
every user's chunks before its scope applies (issue 37's scale rows). Data only: the table
keeps its columns. PostgreSQL and the plain table are unchanged.

Revision ID: 2d3acb60fba9
Revises: 7f2b0c12e390
Create Date: 2026-12-06 18:58:26.538742

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "2d3acb60fba9"
down_revision = "7f2b0c12e390"
branch_labels = None
depends_on = None

DATA_ONLY = True  # no table or column changes (tests/test_migrations.py reads this)
CHUNK_BITS = 20  # as numi/knowledge/index.py's CHUNK_BITS, frozen here for this revision


def _is_fts5(bind) -> bool:
    if bind.dialect.name != "sqlite":
        return False
    sql = bind.execute(
        sa.text("SELECT sql FROM sqlite_master WHERE name = 'fts_document_chunks'")
    ).scalar()
    return bool(sql and "fts5" in sql.lower())


def upgrade():
    bind = op.get_bind()
    if not _is_fts5(bind):
        return
    # Copied out and back rather than updated in place: a new rowid could equal an old one
    # not yet moved.
    op.execute(
        "CREATE TEMP TABLE document_chunks_rekeyed AS "
        "SELECT title, content, attachment_id, user_id, chunk FROM fts_document_chunks"
    )
    op.execute("DELETE FROM fts_document_chunks")
    op.execute(
        "INSERT INTO fts_document_chunks (rowid, title, content, attachment_id, user_id, chunk) "
        f"SELECT (attachment_id << {CHUNK_BITS}) | chunk, title, content, attachment_id, "
        "user_id, chunk FROM document_chunks_rekeyed"
    )
    op.execute("DROP TABLE document_chunks_rekeyed")


def downgrade():
    pass  # the keyed rowids search as any others did before
