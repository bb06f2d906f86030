"""the Markdown mirror setting: users.mirror_json, its folder and why it is paused (issue 42)

Revision ID: 7f2b0c12e390
Revises: f50e1bbd3caa
Create Date: 2026-12-06 16:14:03.186550

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "7f2b0c12e390"
down_revision = "f50e1bbd3caa"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("mirror_json", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("mirror_json")
