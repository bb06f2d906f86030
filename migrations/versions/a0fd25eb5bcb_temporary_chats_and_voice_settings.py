"""temporary chats and voice settings

Revision ID: a0fd25eb5bcb
Revises: d49782b2e9fa
Create Date: 2026-12-02 05:14:22.068023

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "a0fd25eb5bcb"
down_revision = "d49782b2e9fa"
branch_labels = None
depends_on = None


def upgrade():
    # Plain ADD COLUMN, not a batch: SQLite's batch mode copies the chats table, which fails
    # ("database table is locked") while the FTS triggers on messages hold it, and would
    # lose the tables' AUTOINCREMENT.
    op.add_column(
        "chats", sa.Column("temporary", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_index("ix_chats_temporary", "chats", ["temporary", "updated_at"], unique=False)
    op.add_column("users", sa.Column("voice_json", sa.Text(), nullable=True))


def downgrade():
    op.drop_column("users", "voice_json")
    op.drop_index("ix_chats_temporary", table_name="chats")
    op.drop_column("chats", "temporary")
