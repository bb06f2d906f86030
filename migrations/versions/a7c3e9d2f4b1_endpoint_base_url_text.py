"""endpoint base_url as text

endpoints.base_url holds a sealed URL when the URL carries credentials (`user:pass@`, a
query string such as `?api-key=`): the sealed form of a 500-character URL is longer than
500 characters, so the column becomes TEXT. Existing URLs are sealed at start-up
(numi.crypto.seal_plaintext_keys), as endpoint keys are.

Revision ID: a7c3e9d2f4b1
Revises: ef38cb972afb
Create Date: 2026-12-01 22:50:00.000000

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "a7c3e9d2f4b1"
down_revision = "ef38cb972afb"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.alter_column(
            "base_url",
            existing_type=sa.String(length=500),
            type_=sa.Text(),
            existing_nullable=False,
        )


def downgrade():
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.alter_column(
            "base_url",
            existing_type=sa.Text(),
            type_=sa.String(length=500),
            existing_nullable=False,
        )
