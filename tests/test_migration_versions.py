"""The versions/usage migration (d4e7a2b9c1f0) on a database with chats in the old shape:
every chat reads as before, nothing is lost, usage columns come from the stored meta."""

from __future__ import annotations

import json

import sqlalchemy as sa

BEFORE = "c3d9e1f4a8b6"  # the revision before message versions


def test_existing_chats_move_to_the_versions_shape(empty_database_url, tmp_path):
    from flask_migrate import upgrade as alembic_upgrade

    from migration_support import app_at_revision

    app, directory = app_at_revision(empty_database_url, tmp_path, BEFORE)
    with app.app_context():
        from numi.extensions import db

        with db.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO users (id, username, is_admin, created_at) VALUES (1, 'u', true, CURRENT_TIMESTAMP)"
                )
            )
            for chat in ("c1", "c2"):
                conn.execute(
                    sa.text(
                        "INSERT INTO chats (id, user_id, title, created_at, updated_at) "
                        "VALUES (:id, 1, 'T', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                    ),
                    {"id": chat},
                )
            rows = [  # (chat, role, content, meta, deleted)
                ("c1", "user", "q1", None, False),
                ("c2", "user", "other chat", None, False),
                (
                    "c1",
                    "assistant",
                    "old answer",
                    {"model": "m1", "usage": {"input_tokens": 10, "output_tokens": 5}},
                    True,
                ),
                (
                    "c1",
                    "assistant",
                    "a1",
                    {"model": "m1", "usage": {"input_tokens": 12, "output_tokens": 7}},
                    False,
                ),
                ("c1", "user", "q2", {"edited_at": "x"}, False),
                (
                    "c1",
                    "assistant",
                    "a2",
                    {"model": "m2", "metrics": {"input_tokens": 30, "output_tokens": None}},
                    False,
                ),
                ("c2", "assistant", "broken meta", "{not json", False),
            ]
            for chat, role, content, meta, deleted in rows:
                meta_json = meta if isinstance(meta, str) or meta is None else json.dumps(meta)
                conn.execute(
                    sa.text(
                        "INSERT INTO messages (chat_id, role, content, meta_json, created_at, deleted_at) VALUES "
                        "(:chat, :role, :content, :meta, CURRENT_TIMESTAMP, "
                        + ("CURRENT_TIMESTAMP" if deleted else "NULL")
                        + ")"
                    ),
                    {"chat": chat, "role": role, "content": content, "meta": meta_json},
                )
        alembic_upgrade(directory=directory)
        with db.engine.connect() as conn:
            got = conn.execute(
                sa.text(
                    "SELECT id, chat_id, content, parent_id, selected, active, model, input_tokens, output_tokens, "
                    "deleted_at IS NOT NULL FROM messages ORDER BY id"
                )
            ).all()
        by_content = {r.content: r for r in got}
        assert len(got) == len(rows)  # nothing lost
        # Each row follows the one before it in its chat (deleted ones included); first rows get 0.
        assert [by_content[c].parent_id for c in ("q1", "old answer", "a1", "q2", "a2")] == [
            0,
            by_content["q1"].id,
            by_content["old answer"].id,
            by_content["a1"].id,
            by_content["q2"].id,
        ]
        assert (
            by_content["other chat"].parent_id == 0
            and by_content["broken meta"].parent_id == by_content["other chat"].id
        )
        assert all(r.selected and r.active for r in got)
        assert bool(by_content["old answer"][9]) and not any(
            r[9] for r in got if r.content != "old answer"
        )  # deletions kept
        assert [
            (by_content[c].model, by_content[c].input_tokens, by_content[c].output_tokens)
            for c in ("old answer", "a1", "a2", "q2", "broken meta")
        ] == [
            ("m1", 10, 5),
            ("m1", 12, 7),
            ("m2", 30, None),
            (None, None, None),
            (None, None, None),
        ]

        # The app reads the migrated chat as before: the same transcript, no versions shown.
        from numi.chat.versions import version_info
        from numi.models import Message

        shown = (
            db.session.execute(
                sa.select(Message)
                .where(Message.chat_id == "c1", Message.shown())
                .order_by(Message.id)
            )
            .scalars()
            .all()
        )
        assert [m.content for m in shown] == ["q1", "a1", "q2", "a2"]
        assert version_info("c1", shown) == {}
