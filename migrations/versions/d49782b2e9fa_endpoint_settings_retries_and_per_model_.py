"""endpoint settings: retries and per-model capability overrides

endpoints.settings_json: the user's say over the server's, as JSON: `retries` (false turns
Numi's own retries off behind a gateway that retries) and `model_capabilities` (per model
id: tools, vision, reasoning, context_window). A nullable column only; NULL means none.

Revision ID: d49782b2e9fa
Revises: b8d4f1a6c2e9
Create Date: 2026-12-02 05:08:34.898025

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "d49782b2e9fa"
down_revision = "b8d4f1a6c2e9"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.add_column(sa.Column("settings_json", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.drop_column("settings_json")
