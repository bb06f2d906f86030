"""message in_context and user fallbacks

`messages.in_context`: false when the user left the message out of the model's context
(it stays in the transcript). `users.fallbacks_json`: the user's default fallback chain
from Settings, used by chats without a chain of their own.

Revision ID: 24e748701585
Revises: 0cf14fd8bd4f
Create Date: 2026-12-02 05:08:00.221456

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "24e748701585"
down_revision = "0cf14fd8bd4f"
branch_labels = None
depends_on = None


def upgrade():
    # Plain ADD COLUMN, not a batch: SQLite's batch mode rebuilds the table and would lose
    # the messages table's AUTOINCREMENT (ids that are never reused order the transcript).
    op.add_column(
        "messages",
        sa.Column("in_context", sa.Boolean(), server_default=sa.true(), nullable=False),
    )
    op.add_column("users", sa.Column("fallbacks_json", sa.Text(), nullable=True))


def downgrade():
    # Plain DROP COLUMN (SQLite 3.35+), for the same reason.
    op.drop_column("users", "fallbacks_json")
    op.drop_column("messages", "in_context")
