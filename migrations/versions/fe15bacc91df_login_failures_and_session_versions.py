"""login failures and session versions

login_failures: the login throttle's database store (numi/login_limits.py), one row per
hashed key (username, client address, or both) with its failure count and the time until
which logins for it are refused.
users.session_version: stamped into the session cookie; raised by logout, "Log out
everywhere" and a password change. Existing rows start at 0; cookies issued before this
revision carry no version and are asked to log in once more.

Revision ID: fe15bacc91df
Revises: e5f2a9c7d1b4
Create Date: 2026-11-30 18:44:31.880211

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "fe15bacc91df"
down_revision = "e5f2a9c7d1b4"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "login_failures",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failure_at", sa.Float(), nullable=False),
        sa.Column("blocked_until", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_login_failures")),
    )
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_login_failures_last_failure_at"), ["last_failure_at"], unique=False
        )

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("session_version", sa.Integer(), server_default="0", nullable=False)
        )


def downgrade():
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("session_version")

    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_login_failures_last_failure_at"))

    op.drop_table("login_failures")
