"""Is NUMI_DATABASE_URL one Numi can use, and is its database there? One line each, saying
what to do, in place of SQLAlchemy's and psycopg's tracebacks at start.

`database_url` is the setting's parser (a ValueError becomes `invalid_setting`);
`sqlite_module` is NUMI_SQLITE_MODULE's; `check_connection` connects once before the schema is
upgraded.
"""

from __future__ import annotations

import re

from .errors import NumiError

EXAMPLES = "sqlite:///path/to/numi.db or postgresql+psycopg://user@host:5432/numi"
INSTALL_PSYCOPG = "pipx inject numi 'psycopg[binary]', or pip install 'numi[postgres]'"


def without_password(url: str) -> str:
    """`url` with its password shown as ***, for a message or a log line."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def database_url(value: str) -> str:
    """The NUMI_DATABASE_URL setting: an SQLAlchemy URL of SQLite or PostgreSQL whose
    driver is installed. The text is kept as given."""
    from sqlalchemy.engine import make_url  # lazy: start-up time
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # lazy: start-up time

    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError(f"must be a database URL such as {EXAMPLES}") from None
    if url.get_backend_name() == "postgres":  # Heroku's spelling, which SQLAlchemy refuses
        raise ValueError(f"write postgresql+psycopg:// in place of {url.drivername}://")
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(
            f"Numi runs on SQLite or PostgreSQL, not {url.get_backend_name()}: use {EXAMPLES}"
        )
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"SQLAlchemy has no driver {url.drivername!r}: use {EXAMPLES}") from None
    try:
        dialect.import_dbapi()
    except ImportError:
        driver = url.get_driver_name()
        if url.get_backend_name() == "sqlite":
            raise ValueError(f"the driver {driver!r} is not installed: use sqlite:///") from None
        if driver == "psycopg":
            raise ValueError(f"PostgreSQL needs the psycopg package: {INSTALL_PSYCOPG}") from None
        raise ValueError(
            f"the driver {driver!r} is not installed: use postgresql+psycopg:// (psycopg: {INSTALL_PSYCOPG})"
        ) from None
    return value


def sqlite_module(value: str) -> str:
    """The NUMI_SQLITE_MODULE setting: an importable DB-API module of SQLite to open SQLite
    databases with in place of Python's `sqlite3`, for a Python whose `sqlite3` cannot load
    extensions (pyenv's default build, macOS's system Python), so sqlite-vec can load.
    `sqlean.dbapi2` (the `sqlean.py` wheel) or `pysqlite3.dbapi2` (`pysqlite3-binary`)."""
    import importlib  # lazy: start-up time

    name = value.strip()
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise ValueError("must be a Python module name such as sqlean.dbapi2")
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import {name} ({exc}): pip install sqlean.py, or unset it to use sqlite3"
        ) from None
    if not callable(getattr(module, "connect", None)) or not hasattr(module, "sqlite_version_info"):
        raise ValueError(f"{name} is not a DB-API module of SQLite: use sqlean.dbapi2")
    return name


def check_connection(engine) -> None:
    """Connect once; a PostgreSQL database or role that does not exist, or a server that
    does not answer, is a NumiError saying what to run (`database_missing`,
    `database_role_missing`, `database_unreachable`)."""
    from sqlalchemy import text  # lazy: start-up time
    from sqlalchemy.exc import DBAPIError  # lazy: start-up time

    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        raise connection_refusal(engine.url, exc) from None


def connection_refusal(url, exc: BaseException) -> NumiError:
    """What to run when `url`'s database refuses or cannot be reached."""
    said = str(getattr(exc, "orig", None) or exc)
    place = f"{url.host or 'localhost'}:{url.port or 5432}"
    client = f"-h {url.host or 'localhost'} -p {url.port or 5432}"
    missing = re.search(r'database "([^"]+)" does not exist', said)
    if missing:
        return NumiError(
            "database_missing",
            f"NUMI_DATABASE_URL: the database {missing.group(1)!r} does not exist on {place}. "
            f"Create it: createdb {client} -U {url.username or 'postgres'} {missing.group(1)}",
            503,
        )
    role = re.search(r'role "([^"]+)" does not exist', said)
    if role:
        return NumiError(
            "database_role_missing",
            f"NUMI_DATABASE_URL: the role {role.group(1)!r} does not exist on {place}. "
            f"Create it: createuser {client} -U postgres {role.group(1)} (and, for a new "
            f"database, createdb {client} -U postgres -O {role.group(1)} {url.database})",
            503,
        )
    if url.get_backend_name() == "sqlite":
        reason = said.strip().splitlines()[0] if said.strip() else type(exc).__name__
        return NumiError(
            "database_unreachable",
            f"NUMI_DATABASE_URL: cannot open the SQLite database {url.database} ({reason}).",
            503,
        )
    # psycopg: 'connection failed: connection to server at "h", port 5432 failed: <why>'
    first = said.strip().splitlines()[0] if said.strip() else type(exc).__name__
    reason = " ".join(first.rsplit("failed: ", 1)[-1].split())[:200]
    return NumiError(
        "database_unreachable",
        f"NUMI_DATABASE_URL: cannot connect to PostgreSQL at {place} ({reason}). "
        "Is it running? Start it, or fix NUMI_DATABASE_URL.",
        503,
    )
