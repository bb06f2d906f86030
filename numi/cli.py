"""The `numi` command: serve, db, endpoint, user, token, dev.

gevent monkey-patches the standard library first, before anything else is imported, so
that sockets, SSL and threads in Flask, SQLAlchemy and the provider SDKs cooperate.
"""

from gevent import monkey

monkey.patch_all()

import getpass  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import click  # noqa: E402

from . import __version__  # noqa: E402
from .demo import DEMO_ENDPOINT  # noqa: E402
from .providers.kinds import kind_names  # noqa: E402

log = logging.getLogger("numi")


def _app(*, announce: bool = True):
    from . import create_app
    from .setting_values import SettingError

    try:
        app = create_app()
    except SettingError as exc:
        _fail(exc)
    if announce:
        # A command run with another NUMI_DATA_DIR than the server's would silently act
        # on another database: say which one (stderr, so output stays parseable).
        click.echo(f"numi: data directory {app.config['NUMI_DATA_DIR']}", err=True)
    return app


def _fail(exc) -> None:
    """A NumiError that stops a command before it starts (a bad setting, a data directory
    that cannot be written or is in use): one line with its code, exit status 2."""
    click.echo(f"Error: {exc.message} ({exc.code})", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="numi")
def main():
    """Numi: a lightweight, self-hosted chat workstation for LLMs."""


def _require_writable(app) -> None:
    """Refuse to start, in one line, when the data directory (or the SQLite database's
    directory) cannot be written: every send and upload would fail."""
    from .data_dir import unwritable

    places = [app.config["NUMI_DATA_DIR"]]
    url = app.config["NUMI_DATABASE_URL"] or ""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        places.append(str(Path(url.removeprefix("sqlite:///")).parent))
    for place in places:
        reason = unwritable(place)
        if reason:
            click.echo(
                f"Error: Numi cannot write to {place} ({reason}): it keeps the database, "
                "uploads and secrets there. Make it writable, or set NUMI_DATA_DIR.",
                err=True,
            )
            sys.exit(2)


@main.command()
@click.option("--host", help="Address to bind (default NUMI_HOST, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default NUMI_PORT, 8765).")
@click.option(
    "--demo",
    is_flag=True,
    help="Try Numi without an API key: also run the built-in scripted provider and add it as "
    f"the endpoint {DEMO_ENDPOINT!r} (answers are canned, paced like a real model).",
)
@click.option(
    "--open",
    "open_browser",
    is_flag=True,
    help="Open the web browser at Numi's URL (with the access token) once it is ready.",
)
def serve(host, port, demo, open_browser):
    """Apply migrations and serve Numi with gevent's WSGI server.

    Equivalent under gunicorn (after `numi db upgrade`):
    gunicorn -k gevent -w 1 -b 127.0.0.1:8765 app:app
    """
    from gevent.pywsgi import WSGIServer

    from . import settle_heap_for_serving
    from .database import upgrade
    from .endpoints import detect_from_environment
    from .extensions import db
    from .http_server import handler_with_timeout

    app = _app(announce=False)  # the running line below names the data directory
    host = host or app.config["NUMI_HOST"]
    port = port or app.config["NUMI_PORT"]
    held = _hold_data_dir(app, port)  # noqa: F841  (the lock lasts while the process does)
    server = WSGIServer(
        (host, port),
        app,
        log=None,
        error_log=logging.getLogger("numi.wsgi"),
        handler_class=handler_with_timeout(app.config["NUMI_HEADER_TIMEOUT_SECONDS"]),
    )
    try:
        server.init_socket()  # bind before anything else: a taken port is one clear line
    except OSError as exc:
        click.echo(
            f"Error: cannot listen on {host}:{port}: {exc.strerror or exc}. "
            "Is Numi (or something else) running there? Set NUMI_PORT or --port.",
            err=True,
        )
        sys.exit(2)
    _require_writable(app)
    upgrade(app)
    if app.config["NUMI_AUTO_ENDPOINTS"]:
        with app.app_context():
            for endpoint in detect_from_environment():
                log.info("added endpoint %s (%s)", endpoint.name, endpoint.base_url)
            db.session.remove()
    from .demo import hide_demo_endpoint, start_demo, stop_demo

    # A demo endpoint exists only while --demo runs (numi/demo.py).
    provider = None
    if demo:
        provider = start_demo(app)
    else:
        hide_demo_endpoint(app)
    bound = "" if host == _browser_host(host) else f"bound to {host}; "
    # One link, printed and (with --open) opened: each call mints a new one-time code.
    url = _browser_url(app, host, port)
    click.echo(f"Numi is running on {url}  ({bound}data: {app.config['NUMI_DATA_DIR']})")
    if provider is not None:
        click.echo(
            f"Demo: the endpoint {DEMO_ENDPOINT!r} answers with the scripted provider (no API key, no model)."
        )
    settle_heap_for_serving()
    _stop_gracefully_on_sigterm(app, server)
    if open_browser:
        # Connections wait in the listening socket's backlog until serve_forever accepts.
        import gevent

        gevent.spawn(_open_in_browser, url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if provider is not None:
            stop_demo(app, provider)


def _stop_gracefully_on_sigterm(app, server) -> None:
    """SIGTERM (a restart, a deploy): stop listening, let running answers finish within
    NUMI_SHUTDOWN_GRACE_SECONDS, save the rest as interrupted, then exit."""
    import signal

    import gevent

    from .shutdown import stop_turns

    def stop() -> None:
        # No new connections; open sockets still get their turns' events. (Not close():
        # that ends serve_forever, and the process, at once.)
        server.stop_accepting()
        try:
            server.socket.close()
        except OSError:
            pass
        stop_turns(app)
        server.stop(timeout=1)

    stopping: list = []

    def on_sigterm() -> None:
        if not stopping:
            log.warning("SIGTERM: stopping (running answers get a grace period)")
            stopping.append(gevent.spawn(stop))

    gevent.signal_handler(signal.SIGTERM, on_sigterm)


def _hold_data_dir(app, port: int) -> int | None:
    """Lock the data directory for this server, unless a shared Redis coordinates the
    processes that use it; a second server on it stops here (exit status 2)."""
    from pathlib import Path

    from .data_dir import lock_for_serving
    from .errors import NumiError

    if app.config["NUMI_REDIS_URL"]:
        return None
    try:
        return lock_for_serving(Path(app.config["NUMI_DATA_DIR"]), port)
    except NumiError as exc:
        _fail(exc)


def _open_in_browser(url: str) -> None:
    import webbrowser

    if not webbrowser.open(url):
        click.echo(f"No web browser found: open {url} yourself.", err=True)


@main.command("open")
@click.option("--host", help="Address `numi serve` was bound to (default NUMI_HOST).")
@click.option("--port", type=int, help="Its port (default NUMI_PORT).")
def open_browser(host, port):
    """Open Numi in the web browser with a one-time sign-in link (run `numi serve` first)."""
    import webbrowser

    app = _app()
    url = _browser_url(app, host or app.config["NUMI_HOST"], port or app.config["NUMI_PORT"])
    click.echo(f"Opening {url}")
    if not webbrowser.open(url):
        raise click.ClickException(f"No web browser found: open {url} yourself.")


def _browser_host(host: str) -> str:
    # A wildcard bind is reachable on loopback; a browser cannot open 0.0.0.0 everywhere.
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _browser_url(app, host: str, port: int) -> str:
    """The URL to open Numi at; in single-user mode a one-time sign-in link (each call makes
    a new one: the access token itself never goes into a URL the browser keeps)."""
    shown = _browser_host(host)
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{port}/"
    if app.config["NUMI_AUTH"] == "single":
        from .sign_in_links import new_code

        url += "sign-in?code=" + new_code(app.config["NUMI_ACCESS_TOKEN"])
    return url


@main.group()
def db():
    """Database schema commands."""


@db.command("upgrade")
def db_upgrade():
    """Apply all pending migrations."""
    from .database import upgrade

    upgrade(_app())
    click.echo("Database is up to date.")


# --- endpoints -----------------------------------------------------------------------------


@main.group()
def endpoint():
    """Manage provider endpoints (shared by every user)."""


@endpoint.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(kind_names()), default="openai_chat", show_default=True)
@click.option(
    "--base-url", required=True, help="e.g. http://127.0.0.1:11434/v1 or https://api.anthropic.com"
)
@click.option(
    "--api-key-env", metavar="VAR", help="Read the API key from this environment variable."
)
@click.option("--api-key-stdin", is_flag=True, help="Read the API key from standard input.")
@click.option("--default-model", help="Model new chats use.")
def endpoint_add(name, kind, base_url, api_key_env, api_key_stdin, default_model):
    """Add a shared endpoint NAME. Keys never go on the command line (shell history)."""
    from .endpoints import create_endpoint, fetch_models

    api_key = _api_key(api_key_env, api_key_stdin)
    fields = {
        "name": name,
        "kind": kind,
        "base_url": base_url,
        "api_key": api_key,
        "default_model": default_model,
    }
    with _context() as app:
        created = _checked(
            lambda: create_endpoint(None, fields, max_name=app.config["NUMI_MAX_NAME_CHARS"])
        )
        click.echo(f"Added endpoint {created.name} (id {created.id}).")
        _report_models(created, fetch_models(created))


@endpoint.command("edit")
@click.argument("name")
@click.option("--name", "new_name", help="A new name.")
@click.option("--base-url", help="A new base URL.")
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Replace the API key with this environment variable's value.",
)
@click.option(
    "--api-key-stdin",
    is_flag=True,
    help="Replace the API key with a line read from standard input.",
)
@click.option("--default-model", help="Model new chats use (empty to clear).")
@click.option("--reasoning-policy", type=click.Choice(["auto", "preserve", "strip"]))
@click.option("--enable/--disable", "enabled", default=None, help="Offer the endpoint, or not.")
def endpoint_edit(
    name, new_name, base_url, api_key_env, api_key_stdin, default_model, reasoning_policy, enabled
):
    """Change the shared endpoint NAME; options not given stay as they are."""
    from .endpoints import fetch_models, find_by_name, update_endpoint

    if api_key_env and api_key_stdin:
        raise click.UsageError("Give --api-key-env or --api-key-stdin, not both.")
    fields = {
        key: value
        for key, value in (
            ("name", new_name),
            ("base_url", base_url),
            ("default_model", default_model),
            ("reasoning_policy", reasoning_policy),
            ("enabled", enabled),
        )
        if value is not None
    }
    api_key = _api_key(api_key_env, api_key_stdin)
    if api_key:
        fields["api_key"] = api_key
    if not fields:
        raise click.UsageError("Nothing to change: give at least one option.")
    with _context() as app:
        found = find_by_name(None, name)
        if found is None:
            raise click.ClickException(f"No shared endpoint named {name!r}.")
        _checked(lambda: update_endpoint(found, fields, max_name=app.config["NUMI_MAX_NAME_CHARS"]))
        click.echo(f"Updated endpoint {found.name} (id {found.id}).")
        if found.models_fetched_at is None and {"base_url", "api_key"} & set(fields):
            _report_models(found, fetch_models(found))  # pointed at another server or key


def _report_models(endpoint, problem: str | None) -> None:
    """One line on the fetched model list: how many, and the default model's context
    size and tools as the server reported them (or why the list is missing)."""
    from .endpoints import model_capabilities

    if problem:
        click.echo(f"Models not fetched ({problem}); they will be fetched again later.")
        return
    line = f"{len(endpoint.models)} model{'s' if len(endpoint.models) != 1 else ''} listed"
    if endpoint.default_model:
        caps = model_capabilities(endpoint, endpoint.default_model)
        window = f"{caps.context_window:,} tokens" if caps.context_window else "unknown"
        line += (
            f"; {endpoint.default_model}: context {window} ({caps.sources['context_window']}),"
            f" tools {'on' if caps.tools else 'off'} ({caps.sources['tools']})"
        )
    click.echo(line + ".")


def _api_key(api_key_env: str | None, api_key_stdin: bool) -> str | None:
    """The key from an environment variable or standard input (never from the command line)."""
    import os

    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.ClickException(f"{api_key_env} is not set.")
        return api_key
    if api_key_stdin:
        return sys.stdin.readline().strip() or None
    return None


@endpoint.command("list")
def endpoint_list():
    """List shared and per-user endpoints."""
    from sqlalchemy import select

    from .extensions import db as database
    from .models import Endpoint

    with _context():
        rows = database.session.execute(
            select(Endpoint).where(Endpoint.deleted_at.is_(None)).order_by(Endpoint.id)
        ).scalars()
        for e in rows:
            owner = "shared" if e.user_id is None else f"user {e.user_id}"
            click.echo(
                f"{e.id}\t{e.name}\t{e.kind}\t{e.base_url}\t{e.default_model or '-'}\t{owner}"
            )


@endpoint.command("remove")
@click.argument("name")
def endpoint_remove(name):
    """Remove the shared endpoint NAME."""
    from .endpoints import find_by_name, remove_endpoint

    with _context():
        found = find_by_name(None, name)
        if found is None:
            raise click.ClickException(f"No shared endpoint named {name!r}.")
        remove_endpoint(found)
        click.echo(f"Removed endpoint {name}.")


@endpoint.command("models")
@click.argument("name")
def endpoint_models(name):
    """Fetch and list the models of the shared endpoint NAME (also a connection test)."""
    from .endpoints import find_by_name, missing_default_model, models

    with _context():
        found = find_by_name(None, name)
        if found is None:
            raise click.ClickException(f"No shared endpoint named {name!r}.")
        for model in _checked(lambda: models(found, max_age_seconds=0, refresh=True)):
            click.echo(model["id"])
        problem = missing_default_model(found)
        if problem:
            raise click.ClickException(problem)


# --- users and tokens ----------------------------------------------------------------------


@main.group()
def user():
    """Manage users (multi-user mode)."""


@user.command("create")
@click.argument("username")
@click.option("--admin", is_flag=True, help="May manage shared endpoints and use workspace tools.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def user_create(username, admin, password_stdin):
    """Create USERNAME; asks for the password unless --password-stdin."""
    from sqlalchemy import select

    from .extensions import db as database
    from .models import User
    from .passwords import hash_password

    if not 1 <= len(username) <= 100:
        raise click.ClickException("A username has 1 to 100 characters.")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat: ") != password:
            raise click.ClickException("The passwords differ.")
    if len(password) < 8:
        raise click.ClickException("A password has at least 8 characters.")
    with _context():
        if database.session.execute(
            select(User).where(User.username == username)
        ).scalar_one_or_none():
            raise click.ClickException(f"User {username!r} exists already.")
        database.session.add(
            User(username=username, password_hash=hash_password(password), is_admin=admin)
        )
        database.session.commit()
        click.echo(f"Created user {username}{' (admin)' if admin else ''}.")


@user.command("list")
def user_list():
    """List users."""
    from sqlalchemy import select

    from .extensions import db as database
    from .models import User

    with _context():
        for u in database.session.execute(select(User).order_by(User.id)).scalars():
            click.echo(f"{u.id}\t{u.username}\t{'admin' if u.is_admin else ''}")


@main.group()
def token():
    """API bearer tokens (multi-user mode) and the access token (single-user mode)."""


@token.command("show")
def token_show():
    """Print single-user mode's access token (NUMI_ACCESS_TOKEN or the generated one)."""
    app = _app()
    if app.config["NUMI_AUTH"] != "single":
        raise click.ClickException("Only single-user mode (NUMI_AUTH=single) has an access token.")
    click.echo(app.config["NUMI_ACCESS_TOKEN"])


@token.command("create")
@click.option("--user", "username", required=True, help="The user the token acts as.")
@click.option("--name", default="api", show_default=True, help="A label for the token.")
def token_create(username, name):
    """Create a bearer token for /api/*; it is shown once."""
    from sqlalchemy import select

    from .extensions import db as database
    from .identity import hash_token, new_token
    from .models import ApiToken, User

    with _context():
        found = database.session.execute(
            select(User).where(User.username == username)
        ).scalar_one_or_none()
        if found is None:
            raise click.ClickException(f"No user {username!r}.")
        secret = new_token()
        database.session.add(
            ApiToken(user_id=found.id, name=name[:100], token_hash=hash_token(secret))
        )
        database.session.commit()
        click.echo(secret)


# --- export --------------------------------------------------------------------------------


@main.command("export")
@click.option(
    "--all",
    "directory",
    required=True,
    type=click.Path(file_okay=False, writable=True),
    metavar="DIR",
    help="Write every live chat into DIR/<user>/ (one file per chat), and the user's saved "
    "prompts into DIR/<user>/prompts.json.",
)
@click.option("--user", "username", help="Only this user's chats.")
@click.option(
    "--fmt",
    type=click.Choice(["json", "md", "txt", "html"]),
    default="json",
    show_default=True,
    help="json re-imports losslessly (POST /api/import or Settings → Import).",
)
def export_all(directory, username, fmt):
    """Export chats to files, for backups."""
    from pathlib import Path

    from sqlalchemy import select

    import json

    from . import prompts as prompt_store
    from .chat.export import export_filename, render_export
    from .extensions import db as database
    from .models import Chat, User

    with _context():
        stmt = select(User).order_by(User.id)
        if username:
            stmt = stmt.where(User.username == username)
        found = list(database.session.execute(stmt).scalars())
        if username and not found:
            raise click.ClickException(f"No user {username!r}.")
        total = 0
        for owner in found:
            chats = (
                database.session.execute(
                    select(Chat)
                    .where(
                        Chat.user_id == owner.id,
                        Chat.deleted_at.is_(None),
                        Chat.temporary.is_(False),  # temporary chats are never kept
                    )
                    .order_by(Chat.created_at, Chat.id)
                )
                .scalars()
                .all()
            )
            document = prompt_store.export_document(owner.id)
            if not chats and not document["prompts"]:
                continue
            folder = Path(directory) / export_filename(owner.username, fmt).rsplit(".", 1)[0]
            folder.mkdir(parents=True, exist_ok=True)
            if document["prompts"]:
                # The user's saved prompts travel with their chats (Import reads this file too).
                (folder / "prompts.json").write_text(
                    json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8"
                )
            for chat in chats:
                exported = render_export(owner.id, chat, fmt)
                # The id keeps two chats with one title apart and makes reruns overwrite, not pile up.
                stem = exported.filename.rsplit(".", 1)[0]
                (folder / f"{stem}-{chat.id[:8]}.{fmt}").write_text(exported.body, encoding="utf-8")
                total += 1
            database.session.expunge_all()
        click.echo(f"Exported {total} chat{'' if total == 1 else 's'} to {directory}.")


# --- development ---------------------------------------------------------------------------


@main.group()
def dev():
    """Tools for demos, development and benchmarks."""


@dev.command("fake-provider")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8766, show_default=True)
@click.option(
    "--tokens-per-second",
    type=float,
    default=0,
    help="Pace of the default answer (0: as fast as possible).",
)
def fake_provider(host, port, tokens_per_second):
    """Run the scripted provider server (OpenAI Chat, Responses and Anthropic wire formats)."""
    from .testing.__main__ import serve as serve_fake

    serve_fake(host, port, tokens_per_second=tokens_per_second)


class _context:
    """App + app context for a CLI command, with the schema brought up to date."""

    def __enter__(self):
        from .database import upgrade

        self.app = _app()
        upgrade(self.app)
        self.ctx = self.app.app_context()
        self.ctx.push()
        return self.app

    def __exit__(self, *exc):
        self.ctx.pop()
        return False


def _checked(action):
    from .errors import NumiError

    try:
        return action()
    except NumiError as exc:
        raise click.ClickException(f"{exc.message} ({exc.code})") from None
