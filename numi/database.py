"""Engine set-up and schema upgrades.

SQLite is tuned for a web server (WAL, busy timeout, foreign keys). PostgreSQL needs nothing
here. Migrations are Alembic revisions under migrations/, applied by `upgrade()`.
"""

from __future__ import annotations

import re

from flask import Flask
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from .resources import MIGRATIONS as MIGRATIONS_DIR
from .resources import resource_dir


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


MIGRATIONS = resource_dir(MIGRATIONS_DIR)  # the checkout's migrations/, or the wheel's


def enable_migrations(app: Flask):
    """Bind Flask-Migrate (for `flask db ...` and upgrades); imports Alembic."""
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate

        from .extensions import db

        Migrate(app, db, directory=str(MIGRATIONS), render_as_batch=True)
    return app.extensions["migrate"]


def head_revisions() -> set[str]:
    """The newest revision ids, read from the revision files without importing Alembic."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        found = re.search(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        down = re.search(r"^down_revision\s*=\s*(.+)$", text, re.M)
        if found:
            revisions.add(found.group(1))
        if down:
            parents.update(re.findall(r"['\"]([^'\"]+)['\"]", down.group(1)))
    return revisions - parents


def is_current(app: Flask) -> bool:
    """Whether the database is at the newest revision (a cheap check before Alembic)."""
    from .extensions import db

    with app.app_context():
        try:
            with db.engine.connect() as connection:
                stored = {
                    row[0]
                    for row in connection.execute(text("SELECT version_num FROM alembic_version"))
                }
        except Exception:  # no alembic_version table yet: a new database
            return False
        finally:
            db.session.remove()
    return bool(stored) and stored == head_revisions()


def upgrade(app: Flask) -> None:
    """Bring the database schema to the newest revision (Alembic runs only when needed),
    then seal API keys still stored as plaintext (an idempotent data step: it needs the
    app's secret key, which a migration script should not read)."""
    from .crypto import seal_plaintext_keys

    if not is_current(app):
        from flask_migrate import upgrade as alembic_upgrade

        directory = enable_migrations(app).directory
        with app.app_context():
            alembic_upgrade(directory=directory)
    seal_plaintext_keys(app)
    # Answers kept on disk while the database was unavailable go to their chats now.
    from .recovery import restore

    restore(app)


# Full-text search indexes (SQLite FTS5 virtual tables and their shadow tables, or
# PostgreSQL tsvector tables) are created by hand-written SQL in migrations, not by models.
# Their names start with this prefix so schema comparison leaves them out.
SEARCH_INDEX_PREFIX = "fts_"


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    """Alembic filter: compare everything but the search indexes."""
    if type_ in ("table", "index") and name and name.startswith(SEARCH_INDEX_PREFIX):
        return False
    table = getattr(obj, "table", None)
    if (
        type_ in ("index", "column")
        and table is not None
        and table.name.startswith(SEARCH_INDEX_PREFIX)
    ):
        return False
    return True
