"""endpoint models problem: why the last model list fetch failed

Revision ID: b7c3d9e1f2a4
Revises: a0fd25eb5bcb
Create Date: 2026-12-02 08:40:00.000000

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "b7c3d9e1f2a4"
down_revision = "a0fd25eb5bcb"
branch_labels = None
depends_on = None


def upgrade():
    # Plain ADD COLUMN (no batch copy of the table), nullable: no endpoint has a problem yet.
    op.add_column("endpoints", sa.Column("models_problem", sa.String(length=300), nullable=True))


def downgrade():
    op.drop_column("endpoints", "models_problem")
