"""message versions (parent_id, selected, active), usage columns, hidden models, model prices

Versions: a regenerate or an edit keeps the replaced messages as an inactive sibling branch.
Every existing message gets as parent the message saved before it in its chat (deleted
ones included, so no chain is broken; 0 for a chat's first message) and stays selected and
active: every chat reads exactly as before. Rows an earlier edit or regenerate soft-deleted stay deleted: nothing
recorded which edit replaced them, so they cannot be rebuilt into versions honestly.

Usage: `model`, `input_tokens`, `output_tokens` are copied from each message's meta
(`usage`, else `metrics`) in Python, in batches, so the copy is the same on both backends
as the one `Message.meta` makes at save time.

Revision ID: d4e7a2b9c1f0
Revises: 3676a92c6c9e
Create Date: 2026-11-30 18:40:00
"""

import json

from alembic import op
import sqlalchemy as sa

revision = "d4e7a2b9c1f0"
down_revision = "3676a92c6c9e"
branch_labels = None
depends_on = None

BATCH = 2000


def _usage(meta_json):
    # The same rule as numi.models.usage_columns, frozen here: migrations never import the app.
    try:
        meta = json.loads(meta_json) if meta_json else {}
    except ValueError:
        return None, None, None
    if not isinstance(meta, dict):
        return None, None, None
    usage = meta.get("usage") if isinstance(meta.get("usage"), dict) else {}
    metrics = meta.get("metrics") if isinstance(meta.get("metrics"), dict) else {}

    def count(key):
        value = usage.get(key, metrics.get(key))
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        )

    model = meta.get("model")
    return (
        (model[:200] if isinstance(model, str) and model else None),
        count("input_tokens"),
        count("output_tokens"),
    )


def upgrade():
    # Plain ALTER TABLE ADD COLUMN (no batch copy on SQLite): a copied table would lose the
    # fts_messages triggers of revision a6c1f0e3b7d2.
    op.add_column("messages", sa.Column("parent_id", sa.Integer(), nullable=True))
    op.add_column(
        "messages", sa.Column("selected", sa.Boolean(), server_default=sa.true(), nullable=False)
    )
    op.add_column(
        "messages", sa.Column("active", sa.Boolean(), server_default=sa.true(), nullable=False)
    )
    op.add_column("messages", sa.Column("model", sa.String(length=200), nullable=True))
    op.add_column("messages", sa.Column("input_tokens", sa.Integer(), nullable=True))
    op.add_column("messages", sa.Column("output_tokens", sa.Integer(), nullable=True))
    op.create_index(
        "ix_messages_chat_active_id", "messages", ["chat_id", "active", "id"], unique=False
    )
    op.create_index("ix_messages_chat_parent", "messages", ["chat_id", "parent_id"], unique=False)

    op.add_column("endpoints", sa.Column("hidden_models_json", sa.Text(), nullable=True))

    op.create_table(
        "model_prices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_per_mtok", sa.Float(), nullable=False),
        sa.Column("output_per_mtok", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "model"),
    )

    bind = op.get_bind()
    # The linear transcript as a chain: each row's parent is the row before it in its chat,
    # 0 for the first (one correlated lookup per row on the (chat_id, id) index; the same
    # SQL on both backends).
    bind.execute(
        sa.text(
            "UPDATE messages SET parent_id = (SELECT coalesce(max(m2.id), 0) FROM messages m2 "
            "WHERE m2.chat_id = messages.chat_id AND m2.id < messages.id)"
        )
    )
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT id, meta_json FROM messages WHERE id > :last AND meta_json IS NOT NULL ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            break
        updates = []
        for row in rows:
            model, tokens_in, tokens_out = _usage(row.meta_json)
            if model or tokens_in is not None or tokens_out is not None:
                updates.append({"id": row.id, "model": model, "tin": tokens_in, "tout": tokens_out})
        if updates:
            bind.execute(
                sa.text(
                    "UPDATE messages SET model = :model, input_tokens = :tin, output_tokens = :tout WHERE id = :id"
                ),
                updates,
            )
        last = rows[-1].id


def downgrade():
    op.drop_table("model_prices")
    op.drop_column("endpoints", "hidden_models_json")
    op.drop_index("ix_messages_chat_parent", table_name="messages")
    op.drop_index("ix_messages_chat_active_id", table_name="messages")
    # Plain DROP COLUMN (SQLite 3.35+): keeps the fts_messages triggers, as in upgrade().
    for column in ("output_tokens", "input_tokens", "model", "active", "selected", "parent_id"):
        op.drop_column("messages", column)
