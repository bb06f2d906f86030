"""queued follow-ups keep their "Send as is once" list: queued_messages.exempt_json (issue 41)

Revision ID: e6eb10fee5f9
Revises: 2d3acb60fba9
Create Date: 2026-12-06 19:06:37.904934

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "e6eb10fee5f9"
down_revision = "2d3acb60fba9"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("queued_messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exempt_json", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("queued_messages", schema=None) as batch_op:
        batch_op.drop_column("exempt_json")
