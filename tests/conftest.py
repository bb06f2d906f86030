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
- `statements_of(action)`: how many SQL statements `action()` runs on `app` (query-count
  tests compare two sizes of the same page).
- `sqlite_app` / `sqlite_client`: the same on SQLite only, for tests where the backend
  does not matter (pages, rendering, security headers).
- `multi_app` (NUMI_AUTH=multi on every backend) with `users` ("a" and "b": id, username,
  password, bearer token) and `login(client, user)`; `client_a` / `client_b` are logged in.
- `redis_settings()` (module scope): NUMI_REDIS_URL and a unique NUMI_REDIS_PREFIX on the
  Redis at NUMI_TEST_REDIS_URL (default redis://127.0.0.1:6379/0); its keys are deleted
  afterwards. Without a reachable Redis the test is skipped, or fails with CI=true.
- `live_server`: the real `numi serve` in a subprocess on a free loopback port (module
  scope), forked from the worker's pre-imported zygote (tests/server_zygote.py);
  `live_server_factory(**env)` starts more, e.g. in multi-user mode, and
  `live_server_factory(own_process=True)` one started as a process of its own. The object has
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

# One module per concern under tests/fixtures/; this file keeps the live server wired to the
# scripted provider that the turn, context, transcript and tool tests share.
pytest_plugins = [
    "fixtures.databases",
    "fixtures.redis_server",
    "fixtures.users",
    "fixtures.live_server",
    "fixtures.hostile",
    "fixtures.provider",
    "fixtures.browser",
    "fixtures.timing",
    "fixtures.cpu_pool",
]

import pytest  # noqa: E402


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
