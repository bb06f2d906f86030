"""tool settings per user (web search backend, fetch address rules)

Revision ID: 956c23d5b03b
Revises: a6c1f0e3b7d2
Create Date: 2026-11-29 19:11:22.954870

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "956c23d5b03b"
down_revision = "a6c1f0e3b7d2"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "tool_settings",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("settings_json", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_tool_settings_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_tool_settings")),
    )


def downgrade():
    op.drop_table("tool_settings")
