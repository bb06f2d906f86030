"""model aliases (issue 40): a user's own names for gateway clients, each a chain of routes

Revision ID: 9792c82bb03e
Revises: 84fefa791293
Create Date: 2026-12-06 12:51:23.171270

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "9792c82bb03e"
down_revision = "84fefa791293"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "model_aliases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("routes_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_model_aliases_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_aliases")),
        sa.UniqueConstraint("user_id", "name", name=op.f("uq_model_aliases_user_id_name")),
    )
    with op.batch_alter_table("model_aliases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_aliases_user_id"), ["user_id"], unique=False)


def downgrade():
    with op.batch_alter_table("model_aliases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_aliases_user_id"))

    op.drop_table("model_aliases")
