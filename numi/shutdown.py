"""Stopping gracefully: on SIGTERM a server takes no new turns, gives running ones
NUMI_SHUTDOWN_GRACE_SECONDS to finish, then saves each as interrupted (TurnManager.shutdown).

`numi serve` installs this itself (cli.py). Under gunicorn, `numi/gunicorn_config.py`
(`gunicorn -c python:numi.gunicorn_config`) calls `gunicorn_worker_ready` for each worker:
the worker's SIGTERM first stops the turns, then lets gunicorn's own graceful stop go on.
"""

from __future__ import annotations

import logging
import signal

import gevent

from .extensions import turn_manager

log = logging.getLogger(__name__)


def stop_turns(app) -> None:
    """Stop the app's turns gracefully (blocks this greenlet for up to the grace period
    plus the time their saves take); the manager's stopped hooks then close the WebSockets
    with 1012 (service restart): an open socket would otherwise hold the process until it
    is killed."""
    try:
        turn_manager(app).shutdown(app.config["NUMI_SHUTDOWN_GRACE_SECONDS"])
    except Exception:
        log.exception("stopping the running turns failed")


def gunicorn_worker_ready(worker) -> None:
    """gunicorn's post_worker_init hook: the worker's SIGTERM stops the turns first. Keep
    gunicorn's --graceful-timeout above the grace period plus the saves (30 s by default)."""
    app = worker.wsgi
    graceful_exit = worker.handle_exit
    stopping: list = []

    def stop(sig, frame) -> None:
        log.warning("SIGTERM: stopping (running answers get a grace period)")
        stop_turns(app)
        graceful_exit(sig, frame)  # gunicorn's: stop accepting, finish requests, exit

    def on_sigterm(sig, frame) -> None:
        if not stopping:
            stopping.append(gevent.spawn(stop, sig, frame))

    signal.signal(signal.SIGTERM, on_sigterm)
