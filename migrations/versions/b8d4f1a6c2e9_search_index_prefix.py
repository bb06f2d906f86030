"""message search index on PostgreSQL: the first 100,000 characters of each message

to_tsvector refuses a text whose words take more than 1 MB ("string is too long for
tsvector"), and the expression index computes it on every insert: an answer of 30,000
distinct hashes could not be saved at all. The index (and numi/chat/search.py's queries,
which must use the same expression) now covers a bounded prefix. SQLite's FTS5 has no such
limit and is unchanged.

Revision ID: b8d4f1a6c2e9
Revises: 0f1003cb1289
Create Date: 2026-12-02 05:45:00
"""

from alembic import op

revision = "b8d4f1a6c2e9"
down_revision = "0f1003cb1289"
branch_labels = None
depends_on = None

PREFIX = "to_tsvector('simple', left(coalesce(content, ''), 100000))"
WHOLE = "to_tsvector('simple', coalesce(content, ''))"


def _index(expression: str) -> None:
    op.execute("DROP INDEX IF EXISTS fts_messages_idx")
    op.execute(f"CREATE INDEX fts_messages_idx ON messages USING GIN ({expression})")


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        _index(PREFIX)


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        _index(WHOLE)
