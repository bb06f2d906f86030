"""document chunks keep a pgvector column where the extension is created

PostgreSQL with pgvector only: document_chunks gains `embedding`, of pgvector's `vector`
type without a dimension (each embedding model has its own; a search compares only the
query's model and dimension, numi/knowledge/vectors.py), filled here from the float32 bytes
of `vector`, which stay (numpy searches them where pgvector is not used). The search ranks
it with `<=>`, exactly; no ANN index (an HNSW index needs one dimension per column).

Conditional, and a no-op elsewhere, for a reason: the type exists only where a superuser ran
`CREATE EXTENSION vector` in the database, which Numi does not do itself (its role is rarely
a superuser, and an extension is the operator's choice). On SQLite (sqlite-vec reads the
bytes) and on a PostgreSQL without the extension nothing changes, and Numi searches with
numpy, saying so once in the log. The model does not declare the column
(numi.database.include_object leaves it out of the comparison).

Revision ID: 1f56dcefe889
Revises: 19438234b55e
Create Date: 2026-12-07 01:23:10.342256

"""

from array import array

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "1f56dcefe889"
down_revision = "19438234b55e"
branch_labels = None
depends_on = None

# The schema changes only where this extension is created (tests/test_migrations.py reads it).
NEEDS_EXTENSION = "vector"
BATCH = 2000


def _has_extension(bind) -> bool:
    if bind.dialect.name != "postgresql":
        return False
    return bool(
        bind.execute(
            sa.text("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = :name)"),
            {"name": NEEDS_EXTENSION},
        ).scalar()
    )


def upgrade():
    bind = op.get_bind()
    if not _has_extension(bind):
        return
    op.execute("ALTER TABLE document_chunks ADD COLUMN IF NOT EXISTS embedding vector")
    # Kept in the row (MAIN), the bytes moved out to TOAST in its place: pgvector's default
    # (EXTERNAL) put every 256-dimension vector out of line beside the bytes, and a search
    # fetched each from TOAST, 3 buffers a chunk (bench/retrieval.py, README). MAIN still
    # moves it out as a last resort, so a model of 3,072 dimensions fits.
    op.execute("ALTER TABLE document_chunks ALTER COLUMN embedding SET STORAGE MAIN")
    # The vectors already made, converted here once: PostgreSQL has no cast from bytea.
    after = (-1, -1)
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT attachment_id, chunk, vector FROM document_chunks "
                "WHERE vector IS NOT NULL AND (attachment_id, chunk) > (:a, :n) "
                "ORDER BY attachment_id, chunk LIMIT :batch"
            ),
            {"a": after[0], "n": after[1], "batch": BATCH},
        ).all()
        if not rows:
            return
        bind.execute(
            sa.text(
                "UPDATE document_chunks SET embedding = CAST(:e AS vector) "
                "WHERE attachment_id = :a AND chunk = :n"
            ),
            [
                {
                    "a": a,
                    "n": n,
                    # 9 significant digits: the float32 read back is the one stored.
                    "e": "[" + ",".join("%.9g" % x for x in array("f", bytes(v))) + "]",
                }
                for a, n, v in rows
            ],
        )
        after = (rows[-1][0], rows[-1][1])


def downgrade():
    if _has_extension(op.get_bind()):
        op.execute("ALTER TABLE document_chunks DROP COLUMN IF EXISTS embedding")
