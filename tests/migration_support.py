"""For a migration's own test: an app on an empty database, migrated to the revision
before the one under test, so the test can write rows in the old shape and upgrade."""

from __future__ import annotations


def app_at_revision(database_url: str, tmp_path, revision: str):
    """(app, migrations directory): an app on `database_url` upgraded to `revision`."""
    from flask_migrate import upgrade as alembic_upgrade

    from numi import create_app
    from numi.database import enable_migrations

    app = create_app(
        {
            "TESTING": True,
            "NUMI_DATA_DIR": str(tmp_path / "data"),
            "NUMI_DATABASE_URL": database_url,
            "NUMI_LOG_LEVEL": "WARNING",
        }
    )
    directory = enable_migrations(app).directory
    with app.app_context():
        alembic_upgrade(directory=directory, revision=revision)
    return app, directory
