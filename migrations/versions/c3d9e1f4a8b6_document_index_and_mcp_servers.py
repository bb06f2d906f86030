"""document search index (fts_document_chunks, document_index) and MCP servers

document_index: one row per uploaded document with its indexing state (numi/agent/tools/documents.py).
fts_document_chunks: the searchable chunks, created by hand here (schema comparison skips fts_*):
- SQLite with FTS5: an FTS5 table (porter stemming) ranked with bm25();
- PostgreSQL: a plain table with a GIN index on to_tsvector('english', title || content),
  ranked with ts_rank_cd;
- SQLite without FTS5 (and any other database): the same plain table, searched with LIKE
  (the documented fallback: matches, but ranks only by the number of matching words).

Revision ID: c3d9e1f4a8b6
Revises: 956c23d5b03b
Create Date: 2026-11-29 19:30:00
"""

from alembic import op
import sqlalchemy as sa

revision = "c3d9e1f4a8b6"
down_revision = "956c23d5b03b"
branch_labels = None
depends_on = None

SQLITE_FTS5_UP = [
    "CREATE VIRTUAL TABLE fts_document_chunks USING fts5("
    "title, content, attachment_id UNINDEXED, user_id UNINDEXED, chunk UNINDEXED, "
    "tokenize='porter unicode61 remove_diacritics 2')",
]
PLAIN_UP = [
    "CREATE TABLE fts_document_chunks ("
    "id INTEGER PRIMARY KEY, attachment_id INTEGER NOT NULL, user_id INTEGER NOT NULL, "
    "chunk INTEGER NOT NULL, title TEXT NOT NULL, content TEXT NOT NULL)",
    "CREATE INDEX fts_document_chunks_owner ON fts_document_chunks (user_id, attachment_id)",
]
POSTGRES_UP = [
    "CREATE TABLE fts_document_chunks ("
    "id BIGSERIAL PRIMARY KEY, attachment_id INTEGER NOT NULL REFERENCES attachments(id) ON DELETE CASCADE, "
    "user_id INTEGER NOT NULL, chunk INTEGER NOT NULL, title TEXT NOT NULL, content TEXT NOT NULL)",
    "CREATE INDEX fts_document_chunks_owner ON fts_document_chunks (user_id, attachment_id)",
    "CREATE INDEX fts_document_chunks_tsv ON fts_document_chunks "
    "USING GIN (to_tsvector('english', title || ' ' || content))",
]


def _sqlite_has_fts5(bind) -> bool:
    try:
        return bool(
            bind.execute(sa.text("SELECT sqlite_compileoption_used('ENABLE_FTS5')")).scalar()
        )
    except Exception:
        return False


def upgrade():
    op.create_table(
        "document_index",
        sa.Column("attachment_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("chunks_total", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("indexed_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attachment_id"],
            ["attachments.id"],
            name=op.f("fk_document_index_attachment_id_attachments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_document_index_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("attachment_id", name=op.f("pk_document_index")),
    )
    with op.batch_alter_table("document_index", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_document_index_user_id"), ["user_id"], unique=False)

    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("transport", sa.String(length=16), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=True),
        sa.Column("command", sa.String(length=500), nullable=True),
        sa.Column("args_json", sa.Text(), nullable=True),
        sa.Column("env_json", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("always_approve", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_mcp_servers_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mcp_servers")),
    )
    with op.batch_alter_table("mcp_servers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_mcp_servers_user_id"), ["user_id"], unique=False)

    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        statements = POSTGRES_UP
    elif bind.dialect.name == "sqlite" and _sqlite_has_fts5(bind):
        statements = SQLITE_FTS5_UP
    else:
        statements = PLAIN_UP
    for statement in statements:
        op.execute(statement)


def downgrade():
    op.execute("DROP TABLE IF EXISTS fts_document_chunks")
    with op.batch_alter_table("mcp_servers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_mcp_servers_user_id"))
    op.drop_table("mcp_servers")
    with op.batch_alter_table("document_index", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_document_index_user_id"))
    op.drop_table("document_index")
