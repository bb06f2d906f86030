"""Engine set-up and schema upgrades.

SQLite is tuned for a web server (WAL, busy timeout, foreign keys). PostgreSQL needs nothing
here. Migrations are Alembic revisions under migrations/, applied by `upgrade()`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import gevent
from flask import Flask
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from .crypto import seal_plaintext_keys
from .database_check import check_connection
from .errors import NumiError
from .extensions import db
from .recovery import restore
from .resources import MIGRATIONS as MIGRATIONS_DIR
from .resources import resource_dir


# How long a SQLite write waits for another connection's lock (an operator's `sqlite3`
# session, a `.backup`, a `numi` command, another worker) before "database is locked".
BUSY_TIMEOUT_MS = 10_000
# The same wait for a save that retries by itself (agent/durable.py). SQLite's busy handler
# sleeps inside the C library, where gevent cannot switch to another greenlet: a 10 s wait
# there stops every stream and request of the process. A save that waits this long per try
# and yields between tries stops nobody (bench/locked.py).
BRIEF_BUSY_TIMEOUT_MS = 50


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
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()
        load_sqlite_vec(dbapi_connection)


def load_sqlite_vec(dbapi_connection) -> bool:
    """Load sqlite-vec (`numi[knowledge]`, from its wheel) into a new SQLite connection, for
    document search by meaning. Quietly False when it is missing or cannot load: search is
    then full-text, and numi.knowledge.vectors says so once in the log."""
    if not hasattr(dbapi_connection, "enable_load_extension"):
        return False  # a Python built without loadable extensions: not worth the import
    try:
        import sqlite_vec  # lazy: optional extra knowledge

        dbapi_connection.enable_load_extension(True)
        try:
            sqlite_vec.load(dbapi_connection)
        finally:
            dbapi_connection.enable_load_extension(False)
    except Exception:  # ImportError, or a Python built without loadable extensions
        return False
    return True


@contextmanager
def transaction(session) -> Iterator[None]:
    """The block's writes as one transaction: committed when the block ends, rolled back
    when it raises (and the error raised on), so a failed operation changes nothing and
    leaves the session usable for the next request."""
    try:
        yield
        session.commit()
    except Exception:
        session.rollback()
        raise


@contextmanager
def brief_lock_waits(session) -> Iterator[None]:
    """Within the block, the session's SQLite writes wait at most BRIEF_BUSY_TIMEOUT_MS for
    another connection's lock, then fail "database is locked" for the caller to retry after
    yielding. Other backends wait on a socket, which gevent switches out of: unchanged."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    raw = session.connection().connection.dbapi_connection
    raw.execute(f"PRAGMA busy_timeout={BRIEF_BUSY_TIMEOUT_MS}")
    try:
        yield
    finally:
        # The connection may be back in the pool by now (the save committed or rolled
        # back): nothing ran on it meanwhile, as nothing here yields.
        try:
            raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except Exception:  # closed with its broken session: a new one gets the pragma anew
            pass


@contextmanager
def overwriting_deletes(session) -> Iterator[None]:
    """On SQLite, what the session's statements inside delete or overwrite is overwritten
    with zeros in the database file (`PRAGMA secure_delete` on this connection, for these
    statements only: it costs writes). Call `drop_old_copies` after the commit: the WAL
    still holds the pages as they were. Elsewhere it does nothing: PostgreSQL keeps an
    updated row's old version until VACUUM frees its space and a later write reuses it."""
    sqlite = session.get_bind().dialect.name == "sqlite"
    if sqlite:
        session.execute(text("PRAGMA secure_delete=ON"))
    try:
        yield
    finally:
        if sqlite:
            session.execute(text("PRAGMA secure_delete=OFF"))


def drop_old_copies(engine: Engine) -> None:
    """On SQLite, copy the WAL into the database file and empty it (a TRUNCATE checkpoint),
    so the pages `overwriting_deletes` zeroed leave no older copy in the -wal file. It waits
    for readers, so it runs in the threadpool on a connection of its own: the hub does not
    wait. A checkpoint kept busy still drops nothing it should not; the next one drops it."""
    if engine.dialect.name != "sqlite" or not engine.url.database:
        return
    if engine.url.database == ":memory:":
        return

    def checkpoint(path: str) -> None:
        connection = sqlite3.connect(path, timeout=10)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            connection.close()

    gevent.get_hub().threadpool.apply(checkpoint, (engine.url.database,))


MIGRATIONS = resource_dir(MIGRATIONS_DIR)  # the checkout's migrations/, or the wheel's


def enable_migrations(app: Flask):
    """Bind Flask-Migrate (for `flask db ...` and upgrades); imports Alembic."""
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate  # lazy: start-up time

        Migrate(app, db, directory=str(MIGRATIONS), render_as_batch=True)
    return app.extensions["migrate"]


REVISION_LINE = re.compile(r"""^revision\s*=\s*['"]([^'"]+)['"]""")
DOWN_REVISION_LINE = re.compile(r"^down_revision\s*=\s*(.*)$")


def shipped_revisions() -> tuple[set[str], set[str]]:
    """(every revision id under migrations/versions, the newest among them), read from the
    revision files' first lines without importing Alembic (with Mako and Pygments, a third
    of a bare Flask start). Each file is read up to its `down_revision`, near its top."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        with path.open(encoding="utf-8") as lines:
            down = None
            for line in lines:
                if found := REVISION_LINE.match(line):
                    revisions.add(found.group(1))
                elif down is None and (start := DOWN_REVISION_LINE.match(line)):
                    down = start.group(1)
                elif down is not None:
                    down += line  # a merge's tuple of parents, over several lines
                if down is not None and (down.count("(") == down.count(")")):
                    break
        parents.update(re.findall(r"""['"]([^'"]+)['"]""", down or ""))
    return revisions, revisions - parents


def head_revisions() -> set[str]:
    """The newest revision ids (what `alembic heads` says), without importing Alembic."""
    return shipped_revisions()[1]


def stored_revisions(app: Flask) -> set[str]:
    """The revisions the database records (alembic_version): one query, no migration
    context. Empty for a new database."""
    with app.app_context():
        try:
            with db.engine.connect() as connection:
                return {
                    row[0]
                    for row in connection.execute(text("SELECT version_num FROM alembic_version"))
                }
        except Exception:  # no alembic_version table yet: a new database
            return set()
        finally:
            db.session.remove()


def is_current(app: Flask) -> bool:
    """Whether the database is at the newest revision (a cheap check before Alembic)."""
    stored = stored_revisions(app)
    return bool(stored) and stored == head_revisions()


def schema_is_current(app: Flask) -> bool:
    """True when the database is at the newest revision shipped (nothing for Alembic to
    do), False when it is new or older. A revision this Numi does not ship means a newer
    Numi upgraded the database: `database_newer`, before Alembic touches anything."""
    stored = stored_revisions(app)
    revisions, heads = shipped_revisions()
    if stored and stored == heads:
        return True
    unknown = sorted(stored - revisions)
    if unknown:
        raise NumiError(
            "database_newer",
            f"The database is at schema revision {', '.join(unknown)}, which this Numi "
            "does not know: a newer Numi upgraded it. Run that Numi (or a newer one), or "
            "restore a backup taken before the upgrade.",
            503,
        )
    return False


def upgrade(app: Flask) -> None:
    """Bring the database schema to the newest revision (Alembic runs only when needed),
    then seal API keys still stored as plaintext (an idempotent data step: it needs the
    app's secret key, which a migration script should not read)."""
    with app.app_context():
        check_connection(db.engine)  # a missing database or a server down: one line
    # At the head, which is every start but the first after an update, Alembic is not
    # even imported: one query here against ~450 M instructions of Alembic, Mako and
    # Pygments (about a third of a bare Flask start) to learn the same.
    if not schema_is_current(app):
        from flask_migrate import upgrade as alembic_upgrade  # lazy: start-up time

        directory = enable_migrations(app).directory
        with app.app_context():
            alembic_upgrade(directory=directory)
    seal_plaintext_keys(app)
    # Answers kept on disk while the database was unavailable go to their chats now.
    restore(app)


# Full-text search indexes (SQLite FTS5 virtual tables and their shadow tables, or
# PostgreSQL tsvector tables) are created by hand-written SQL in migrations, not by models.
# Their names start with this prefix so schema comparison leaves them out.
SEARCH_INDEX_PREFIX = "fts_"


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    """Alembic filter: compare everything but the search indexes and pgvector's column of
    document_chunks, which a migration adds only where the extension is created (the model
    leaves it out so it maps the same table everywhere)."""
    if type_ == "column" and name == "embedding" and reflected and compare_to is None:
        if getattr(getattr(obj, "table", None), "name", "") == "document_chunks":
            return False
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
