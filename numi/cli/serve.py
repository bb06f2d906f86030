"""`numi serve` and `numi open`.

serve stays lazy: the gevent server, the demo and the shutdown machinery are imported
when it runs, after `numi.cli` has monkey-patched the standard library.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

import click
import gevent

from .. import settle_heap_for_serving
from ..data_dir import lock_for_serving, serving_port, unwritable
from ..demo import DEMO_ENDPOINT, hide_demo_endpoint, start_demo, stop_demo
from ..endpoint_detection import detect_from_environment
from ..errors import NumiError
from ..extensions import db
from ..sign_in_links import new_code
from .base import fail, main, make_app, upgraded

log = logging.getLogger("numi")


def _require_writable(app) -> None:
    """Refuse to start, in one line, when the data directory (or the SQLite database's
    directory) cannot be written: every send and upload would fail."""
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
    from gevent.pywsgi import WSGIServer  # lazy: start-up time

    from ..http_server import handler_with_timeout  # lazy: start-up time

    app = make_app(announce=False)  # the running line below names the data directory
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
    upgraded(app)
    if app.config["NUMI_AUTO_ENDPOINTS"]:
        with app.app_context():
            for endpoint in detect_from_environment():
                log.info("added endpoint %s (%s)", endpoint.name, endpoint.base_url)
            db.session.remove()

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
    _stop_gracefully_on_signals(app, server)
    from ..services import services  # lazy: gevent patch order

    services(app).task_scheduler.start()  # scheduled tasks run from here on, when due
    from ..agent.research_resume import keep_resuming  # lazy: gevent patch order

    gevent.spawn(keep_resuming, app)  # research runs a stop or crash cut short go on
    if open_browser:
        # Connections wait in the listening socket's backlog until serve_forever accepts.
        gevent.spawn(_open_in_browser, url)
    try:
        server.serve_forever()
    finally:
        if provider is not None:
            stop_demo(app, provider)
    click.echo("Numi stopped.")


def _stop_gracefully_on_signals(app, server) -> None:
    """SIGTERM (a restart, a deploy) or Ctrl-C: stop listening, let running answers finish
    within NUMI_SHUTDOWN_GRACE_SECONDS, save the rest as interrupted, then exit. A second
    Ctrl-C exits at once."""
    from ..shutdown import stop_turns  # lazy: start-up time

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

    def on_ctrl_c() -> None:
        # Handled here, not as KeyboardInterrupt: that printed gevent's report of whichever
        # greenlet it hit (a traceback, or a bare timestamp) instead of a line saying so.
        if stopping:
            click.echo("Numi stopped (running answers were not saved).")
            os._exit(130)
        stopping.append(gevent.spawn(stop))

    gevent.signal_handler(signal.SIGINT, on_ctrl_c)


def _hold_data_dir(app, port: int) -> int | None:
    """Lock the data directory for this server, unless a shared Redis coordinates the
    processes that use it; a second server on it stops here (exit status 2)."""
    if app.config["NUMI_REDIS_URL"]:
        return None
    try:
        return lock_for_serving(Path(app.config["NUMI_DATA_DIR"]), port)
    except NumiError as exc:
        fail(exc)


def _open_in_browser(url: str) -> None:
    import webbrowser  # lazy: start-up time

    if not webbrowser.open(url):
        click.echo(f"No web browser found: open {url} yourself.", err=True)


@main.command("open")
@click.option("--host", help="Address `numi serve` was bound to (default NUMI_HOST).")
@click.option(
    "--port",
    type=int,
    help="Its port (default NUMI_PORT, else the port of the `numi serve` on this data directory).",
)
def open_browser(host, port):
    """Open Numi in the web browser with a one-time sign-in link (run `numi serve` first)."""
    import webbrowser  # lazy: start-up time

    app = make_app()
    url = _browser_url(app, host or app.config["NUMI_HOST"], port or _serving_port(app))
    click.echo(f"Opening {url}")
    if not webbrowser.open(url):
        raise click.ClickException(f"No web browser found: open {url} yourself.")


def _serving_port(app) -> int:
    """NUMI_PORT when it is set; else the port of the `numi serve` holding the data
    directory (its serve.lock says), which may have been started with --port; else 8765."""
    if os.environ.get("NUMI_PORT"):
        return app.config["NUMI_PORT"]
    return serving_port(Path(app.config["NUMI_DATA_DIR"])) or app.config["NUMI_PORT"]


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
        url += "sign-in?code=" + new_code(app.config["NUMI_ACCESS_TOKEN"])
    return url
