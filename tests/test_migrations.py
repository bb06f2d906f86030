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


def _alembic_scripts(app):
    from alembic.script import ScriptDirectory

    from numi.database import enable_migrations

    migrate = enable_migrations(app)
    with app.app_context():
        return ScriptDirectory.from_config(migrate.migrate.get_config(migrate.directory))


def test_the_fast_check_reads_every_revision_alembic_ships(app):
    from numi.database import shipped_revisions

    scripts = _alembic_scripts(app)
    revisions, heads = shipped_revisions()
    assert revisions == {script.revision for script in scripts.walk_revisions()}
    assert heads == set(scripts.get_heads()) and len(revisions) > 1


def test_an_outdated_database_is_still_upgraded(app):
    """A database one revision behind (as after updating Numi) goes through Alembic."""
    from flask_migrate import downgrade

    from numi.database import enable_migrations, is_current, stored_revisions, upgrade

    scripts = _alembic_scripts(app)
    head = scripts.get_revision(scripts.get_current_head())
    # Back to before the newest revision that changes the schema: a data-only one (its
    # module says DATA_ONLY) leaves nothing for the check below to see.
    # The same for one that changes the schema of other databases only (its DIALECTS).
    with app.app_context():
        dialect = db.engine.dialect.name
    # And one that changes it only where an extension is created (pgvector's column), which
    # these fresh databases do not have.
    changed = head
    while (
        getattr(changed.module, "DATA_ONLY", False)
        or dialect not in getattr(changed.module, "DIALECTS", (dialect,))
        or getattr(changed.module, "NEEDS_EXTENSION", None)
    ):
        changed = scripts.get_revision(changed.down_revision)
    newest_tables = set(db.metadata.tables)
    with app.app_context():
        downgrade(directory=enable_migrations(app).directory, revision=changed.down_revision)
        with db.engine.connect() as conn:
            before = _columns(conn)
    assert stored_revisions(app) == {changed.down_revision} and not is_current(app)

    upgrade(app)

    assert stored_revisions(app) == {head.revision} and is_current(app)
    with app.app_context():
        with db.engine.connect() as conn:
            after = _columns(conn)
    assert newest_tables <= {table for table, _ in after}
    assert before != after, "not vacuous: the downgrade removed what the upgrade put back"


def _columns(conn) -> set[tuple[str, str]]:
    """Every (table, column): the newest revision may add a table or only a column."""
    inspector = sa.inspect(conn)
    return {
        (table, column["name"])
        for table in inspector.get_table_names()
        for column in inspector.get_columns(table)
    }


def test_a_database_from_a_newer_numi_is_refused_and_left_alone(app):
    from numi.database import stored_revisions, upgrade
    from numi.errors import NumiError

    with app.app_context():
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff0000aaaa'"))
            tables = set(sa.inspect(conn).get_table_names())

    with pytest.raises(NumiError) as refused:
        upgrade(app)

    assert refused.value.code == "database_newer"
    assert "ffff0000aaaa" in refused.value.message and "newer Numi" in refused.value.message
    assert stored_revisions(app) == {"ffff0000aaaa"}
    with app.app_context():
        with db.engine.connect() as conn:
            assert set(sa.inspect(conn).get_table_names()) == tables
