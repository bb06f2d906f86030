"""The migrations and the models describe the same schema, on every backend."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

import pytest

from numi.database import include_object
from numi.extensions import db


@pytest.fixture
def database_url(empty_database_url):
    """These tests check the real upgrade path: each app starts from an empty database,
    not from the suite's migrated template."""
    return empty_database_url


def test_upgrade_to_head_matches_the_models(app):
    with app.app_context():
        with db.engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_object": include_object,
                },
            )
            diffs = compare_metadata(context, db.metadata)
            tables = set(sa.inspect(conn).get_table_names())
    assert diffs == [], f"migrations differ from numi/models.py; run `flask db migrate`: {diffs}"
    # Not vacuous: the upgrade really created every model's table.
    assert set(db.metadata.tables) <= tables
    assert {
        "users",
        "chats",
        "messages",
        "endpoints",
        "api_tokens",
        "attachments",
        "checkpoints",
    } <= tables
    assert "alembic_version" in tables


def test_upgrade_is_idempotent_and_records_head(app):
    from alembic.script import ScriptDirectory

    from numi.database import enable_migrations, head_revisions, is_current, upgrade

    upgrade(app)  # a second run (every `numi serve` start) changes nothing
    assert is_current(app)
    migrate = enable_migrations(app)
    with app.app_context():
        config = migrate.migrate.get_config(migrate.directory)
        head = ScriptDirectory.from_config(config).get_current_head()
        assert head_revisions() == {head}, "the fast start-up check reads the same head as Alembic"
        with db.engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    assert head is not None and current == head


def test_sqlite_is_tuned_for_a_web_server(sqlite_app):
    with sqlite_app.app_context():
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar().lower() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
