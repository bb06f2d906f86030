"""live messages index (chat_id, deleted_at, id): bounded history loads and counts

Revision ID: e5f2a9c7d1b4
Revises: c3d9e1f4a8b6
Create Date: 2026-11-30 19:05:00

"""

from alembic import op


# revision identifiers, used by Alembic.
revision = "e5f2a9c7d1b4"
down_revision = "c3d9e1f4a8b6"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_messages_chat_live", ["chat_id", "deleted_at", "id"], unique=False
        )


def downgrade():
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_chat_live")
