"""import jobs: imports run in the background, one running job per user (issue 34)

The unique (user_id, running) pair holds "one running import per user": `running` is true
while a job works and NULL once it ended, and NULLs never collide.

Revision ID: 6b28c03a138b
Revises: 53cead8a178e
Create Date: 2026-12-06 06:56:15.826188

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "6b28c03a138b"
down_revision = "53cead8a178e"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "import_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("running", sa.Boolean(), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=True),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("error_code", sa.String(length=60), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_import_jobs_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_jobs")),
        sa.UniqueConstraint("user_id", "running", name="uq_import_jobs_one_running"),
        sqlite_autoincrement=True,  # its id is in URLs: never reused
    )
    with op.batch_alter_table("import_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_import_jobs_user_id"), ["user_id"], unique=False)


def downgrade():
    with op.batch_alter_table("import_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_import_jobs_user_id"))

    op.drop_table("import_jobs")
