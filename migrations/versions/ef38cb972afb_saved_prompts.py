"""saved prompts: one row per (user, /command)

prompts: a user's saved prompt (title, command, text). (user_id, command) is unique: the
composer's `/` list and the API find a command by it, and the same index serves the owner's
list sorted by command. A new table only; nothing existing changes.

Revision ID: ef38cb972afb
Revises: ee63e773f9b2
Create Date: 2026-11-30 22:38:48.209082

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "ef38cb972afb"
down_revision = "ee63e773f9b2"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "prompts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("command", sa.String(length=32), nullable=False),
        sa.Column("title", sa.String(length=100), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_prompts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prompts")),
        sa.UniqueConstraint("user_id", "command", name=op.f("uq_prompts_user_id_command")),
    )


def downgrade():
    op.drop_table("prompts")
