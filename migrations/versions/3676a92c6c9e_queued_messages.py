"""queued messages: follow-ups that wait for the running turn, one table scoped to chat and owner

Revision ID: 3676a92c6c9e
Revises: fe15bacc91df
Create Date: 2026-11-30 19:48:40.668039

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "3676a92c6c9e"
down_revision = "fe15bacc91df"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "queued_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("chat_id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("attachments_json", sa.Text(), nullable=True),
        sa.Column("request_id", sa.String(length=100), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("tz_offset", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"],
            ["chats.id"],
            name=op.f("fk_queued_messages_chat_id_chats"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_queued_messages_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queued_messages")),
        sa.UniqueConstraint(
            "chat_id", "request_id", name=op.f("uq_queued_messages_chat_id_request_id")
        ),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("queued_messages", schema=None) as batch_op:
        batch_op.create_index("ix_queued_messages_chat_id_id", ["chat_id", "id"], unique=False)


def downgrade():
    with op.batch_alter_table("queued_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_queued_messages_chat_id_id")

    op.drop_table("queued_messages")
