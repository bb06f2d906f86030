"""message search index (fts_messages)

SQLite: an FTS5 external-content table over messages.content, kept in sync by triggers, so
saving, editing and soft-deleting a message update the index with no application code.
Only live user and assistant text is indexed (tool output is not what people look for).
PostgreSQL: a GIN expression index (fts_messages_idx) on to_tsvector('simple', content),
queried by numi/chat/search.py. Other databases: nothing here; search falls back to ILIKE.
SQLite builds without FTS5 are detected at run time the same way (the table is missing).

Revision ID: a6c1f0e3b7d2
Revises: 286b9b2feb87
Create Date: 2026-11-29 19:20:00
"""

from alembic import op
import sqlalchemy as sa

revision = "a6c1f0e3b7d2"
down_revision = "286b9b2feb87"
branch_labels = None
depends_on = None

# The one condition for "indexed": used identically by every trigger, so each 'delete'
# command removes exactly what an insert added (external-content tables require that).
INDEXED = (
    "{row}.deleted_at IS NULL AND {row}.role IN ('user', 'assistant') AND {row}.content IS NOT NULL"
)

SQLITE_UP = [
    "CREATE VIRTUAL TABLE fts_messages USING fts5("
    "content, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    f"""CREATE TRIGGER fts_messages_ai AFTER INSERT ON messages WHEN {INDEXED.format(row="new")} BEGIN
        INSERT INTO fts_messages(rowid, content) VALUES (new.id, new.content);
    END""",
    f"""CREATE TRIGGER fts_messages_ad AFTER DELETE ON messages WHEN {INDEXED.format(row="old")} BEGIN
        INSERT INTO fts_messages(fts_messages, rowid, content) VALUES ('delete', old.id, old.content);
    END""",
    # One update trigger with both steps in order: the old entry must be deleted before the
    # new one is inserted (same rowid), and separate triggers would fire in no promised order.
    f"""CREATE TRIGGER fts_messages_au AFTER UPDATE OF content, deleted_at, role ON messages BEGIN
        INSERT INTO fts_messages(fts_messages, rowid, content)
            SELECT 'delete', old.id, old.content WHERE {INDEXED.format(row="old")};
        INSERT INTO fts_messages(rowid, content) SELECT new.id, new.content WHERE {INDEXED.format(row="new")};
    END""",
    f"INSERT INTO fts_messages(rowid, content) SELECT id, content FROM messages WHERE {INDEXED.format(row='messages')}",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS fts_messages_ai",
    "DROP TRIGGER IF EXISTS fts_messages_ad",
    "DROP TRIGGER IF EXISTS fts_messages_au",
    "DROP TABLE IF EXISTS fts_messages",
]
POSTGRES_UP = [
    "CREATE INDEX fts_messages_idx ON messages USING GIN (to_tsvector('simple', coalesce(content, '')))",
]
POSTGRES_DOWN = ["DROP INDEX IF EXISTS fts_messages_idx"]


def _sqlite_has_fts5(bind) -> bool:
    try:
        return bool(
            bind.execute(sa.text("SELECT sqlite_compileoption_used('ENABLE_FTS5')")).scalar()
        )
    except Exception:
        return False


def upgrade():
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        if _sqlite_has_fts5(bind):
            for statement in SQLITE_UP:
                op.execute(statement)
    elif bind.dialect.name == "postgresql":
        for statement in POSTGRES_UP:
            op.execute(statement)


def downgrade():
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_DOWN:
            op.execute(statement)
    elif bind.dialect.name == "postgresql":
        for statement in POSTGRES_DOWN:
            op.execute(statement)
