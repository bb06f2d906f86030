"""Engine set-up and schema upgrades.

SQLite is tuned for a web server (WAL, busy timeout, foreign keys). PostgreSQL needs nothing
here. Migrations are Alembic revisions under migrations/, applied by `upgrade()`.
"""

from __future__ import annotations

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine


def configure_engine(engine: Engine) -> None:
    """Install per-connection pragmas on SQLite engines; other backends are left as they are."""
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        # WAL lets readers proceed while the one writer commits; busy_timeout makes a second
        # writer wait instead of failing at once; foreign keys are off by default in SQLite.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def upgrade(app: Flask) -> None:
    """Bring the database schema to the newest revision."""
    from flask_migrate import upgrade as alembic_upgrade

    with app.app_context():
        alembic_upgrade(directory=app.extensions["migrate"].directory)


# Full-text search indexes (SQLite FTS5 virtual tables and their shadow tables, or
# PostgreSQL tsvector tables) are created by hand-written SQL in migrations, not by models.
# Their names start with this prefix so schema comparison leaves them out.
SEARCH_INDEX_PREFIX = "fts_"


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    """Alembic filter: compare everything but the search indexes."""
    if type_ in ("table", "index") and name and name.startswith(SEARCH_INDEX_PREFIX):
        return False
    table = getattr(obj, "table", None)
    if type_ in ("index", "column") and table is not None and table.name.startswith(SEARCH_INDEX_PREFIX):
        return False
    return True
