"""spent sign-in links

spent_sign_in_links: the nonces of single-user mode's one-time sign-in links that have been
used (numi/sign_in_links.py), so a link left in a browser's history never signs in again.

Revision ID: 0cf14fd8bd4f
Revises: a7c3e9d2f4b1
Create Date: 2026-12-02 05:13:49.702925

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "0cf14fd8bd4f"
down_revision = "a7c3e9d2f4b1"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "spent_sign_in_links",
        sa.Column("nonce", sa.String(length=32), nullable=False),
        sa.Column("spent_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("nonce", name=op.f("pk_spent_sign_in_links")),
    )


def downgrade():
    op.drop_table("spent_sign_in_links")
