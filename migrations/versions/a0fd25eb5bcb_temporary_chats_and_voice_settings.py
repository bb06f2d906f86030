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
    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("temporary", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.create_index("ix_chats_temporary", ["temporary", "updated_at"], unique=False)

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("voice_json", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("voice_json")

    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.drop_index("ix_chats_temporary")
        batch_op.drop_column("temporary")
