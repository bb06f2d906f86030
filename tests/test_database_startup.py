"""A database Numi cannot use at start (issue 35, set-up edges): a NUMI_DATABASE_URL that is
not a URL, names another database system or a driver that is not installed, a PostgreSQL
database or role that does not exist, a server that is down; a NUMI_SQLITE_MODULE that
does not import or is no SQLite module. Each is one line saying what
to do, with a code and exit status 2, from the real `numi` command (it was a traceback of
41 to 142 lines)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from turn_support import free_port
from fixtures import POSTGRES_URL
from fixtures.databases import _require_postgres

COMMANDS = (("serve",), ("db", "upgrade"))


def _one_line(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "url, says",
    [
        ("notaurl", "must be a database URL such as sqlite:///"),
        ("mysql://numi@localhost/numi", "Numi runs on SQLite or PostgreSQL, not mysql"),
        ("postgres://numi@localhost/numi", "write postgresql+psycopg:// in place of postgres://"),
        ("postgresql+psycopg2://numi@localhost/numi", "use postgresql+psycopg://"),
    ],
)
def test_a_database_url_numi_cannot_use_is_one_line(numi_cli, url, says):
    for command in COMMANDS:
        result, data_dir = numi_cli(*command, NUMI_DATABASE_URL=url)
        line = _one_line(result)
        assert line.startswith(f"Error: NUMI_DATABASE_URL={url!r}: ") and says in line, line
        assert line.endswith("(invalid_setting)"), line
        assert not (data_dir / "numi.db").exists(), "nothing was created"


@pytest.mark.parametrize(
    "module, says",
    [
        ("no_such_sqlite", "cannot import no_such_sqlite"),
        ("json", "json is not a DB-API module of SQLite"),
        ("sqlean.dbapi2; rm", "must be a Python module name"),
    ],
)
def test_a_sqlite_module_numi_cannot_use_is_one_line(numi_cli, module, says):
    result, data_dir = numi_cli("db", "upgrade", NUMI_SQLITE_MODULE=module)
    line = _one_line(result)
    assert line.startswith(f"Error: NUMI_SQLITE_MODULE={module!r}: ") and says in line, line
    assert line.endswith("(invalid_setting)"), line
    assert not (data_dir / "numi.db").exists(), "nothing was created"


def test_a_refused_database_url_never_shows_its_password(numi_cli):
    result, _ = numi_cli("db", "upgrade", NUMI_DATABASE_URL="mysql://numi:s3cret@db.example/numi")
    line = _one_line(result)
    assert "s3cret" not in line and "mysql://numi:***@db.example/numi" in line, line


def test_postgres_without_psycopg_says_how_to_install_it(numi_process, tmp_path):
    """A pipx install without the postgres extra: psycopg is not importable (here a package
    of that name that fails to import stands first on the path, as a missing one would).
    A process of its own: the command host imported psycopg long ago."""
    hidden = tmp_path / "no-psycopg"
    (hidden / "psycopg").mkdir(parents=True)
    (hidden / "psycopg" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'psycopg'\", name='psycopg')\n"
    )
    import os

    path = os.pathsep.join(p for p in (str(hidden), os.environ.get("PYTHONPATH")) if p)
    result, _ = numi_process(
        "serve", NUMI_DATABASE_URL="postgresql+psycopg://numi@localhost/numi", PYTHONPATH=path
    )
    line = _one_line(result)
    assert "PostgreSQL needs the psycopg package" in line and "numi[postgres]" in line, line
    assert line.endswith("(invalid_setting)"), line


def test_a_postgres_server_that_is_down_is_one_line(numi_cli):
    port = free_port()  # nothing listens there
    for command in COMMANDS:
        result, _ = numi_cli(
            *command, NUMI_DATABASE_URL=f"postgresql+psycopg://postgres@127.0.0.1:{port}/numi"
        )
        line = _one_line(result)
        assert f"cannot connect to PostgreSQL at 127.0.0.1:{port}" in line, line
        assert "Is it running?" in line and line.endswith("(database_unreachable)"), line


@pytest.mark.postgres
@pytest.mark.slow(
    reason="each case runs `numi serve` as a real process, so the one-line refusal is what a "
    "person sees in the terminal"
)
def test_a_missing_postgres_database_or_role_says_what_to_run(numi_cli):
    _require_postgres()
    base = sa.engine.make_url(POSTGRES_URL)
    database = f"numi_missing_{uuid.uuid4().hex[:8]}"
    role = f"numi_nobody_{uuid.uuid4().hex[:8]}"
    cases = (
        (base.set(database=database), "database_missing", f"createdb -h {base.host}"),
        (base.set(username=role), "database_role_missing", f"createuser -h {base.host}"),
    )
    for url, code, says in cases:
        for command in COMMANDS:
            result, _ = numi_cli(
                *command, NUMI_DATABASE_URL=url.render_as_string(hide_password=False)
            )
            line = _one_line(result)
            assert line.endswith(f"({code})") and says in line, line
            assert (database if code == "database_missing" else role) in line, line


def test_an_sqlite_file_that_cannot_be_opened_is_one_line(numi_cli, tmp_path):
    missing = tmp_path / "no-such-folder" / "numi.db"
    result, _ = numi_cli("db", "upgrade", NUMI_DATABASE_URL=f"sqlite:///{missing}")
    line = _one_line(result)
    assert f"cannot open the SQLite database {missing}" in line, line
    assert line.endswith("(database_unreachable)"), line


def test_a_database_from_a_newer_numi_is_one_line(numi_cli):
    """The start-up check skips Alembic at the head; a revision it does not ship (a newer
    Numi's) is refused before Alembic runs, by both commands, and the database is left as is."""
    import sqlite3

    result, data_dir = numi_cli("db", "upgrade")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(data_dir / "numi.db") as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'ffff0000aaaa'")
    for command in COMMANDS:
        result, _ = numi_cli(*command)
        line = _one_line(result)
        assert "schema revision ffff0000aaaa" in line and "newer Numi" in line, line
        assert line.endswith("(database_newer)"), line
    with sqlite3.connect(data_dir / "numi.db") as connection:
        stored = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    assert stored == [("ffff0000aaaa",)]
