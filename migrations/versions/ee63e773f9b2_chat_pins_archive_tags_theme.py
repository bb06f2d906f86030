"""organising chats: pins, archive, tags; theme per user

chats.pinned_at / chats.archived_at (NULL = not pinned / not archived) and the sidebar
index ix_chats_user_sidebar (user, deleted, archived, pinned, updated_at, id): the sidebar's
keyset page is one range scan. chat_tags: one row per (chat, tag) with the owner's id,
indexed by (user_id, tag) for the sidebar's tag filter. users.theme: system|light|dark,
existing users get "system" (what they had). Nothing existing changes meaning.

Revision ID: ee63e773f9b2
Revises: d4e7a2b9c1f0
Create Date: 2026-11-30 19:32:17.890142

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "ee63e773f9b2"
down_revision = "d4e7a2b9c1f0"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "chat_tags",
        sa.Column("chat_id", sa.String(length=36), nullable=False),
        sa.Column("tag", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chats.id"], name=op.f("fk_chat_tags_chat_id_chats"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_chat_tags_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("chat_id", "tag", name=op.f("pk_chat_tags")),
    )
    with op.batch_alter_table("chat_tags", schema=None) as batch_op:
        batch_op.create_index("ix_chat_tags_user_tag", ["user_id", "tag", "chat_id"], unique=False)

    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pinned_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("archived_at", sa.DateTime(), nullable=True))
        batch_op.create_index(
            "ix_chats_user_sidebar",
            ["user_id", "deleted_at", "archived_at", "pinned_at", "updated_at", "id"],
            unique=False,
        )

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("theme", sa.String(length=8), server_default="system", nullable=False)
        )


def downgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("theme")

    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.drop_index("ix_chats_user_sidebar")
        batch_op.drop_column("archived_at")
        batch_op.drop_column("pinned_at")

    with op.batch_alter_table("chat_tags", schema=None) as batch_op:
        batch_op.drop_index("ix_chat_tags_user_tag")

    op.drop_table("chat_tags")
