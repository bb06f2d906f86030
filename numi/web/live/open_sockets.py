"""The WebSockets this process serves, so that a graceful stop can close them.

An open socket is a request that never ends on its own: gunicorn's graceful stop waits for
every request, so one idle tab held a stopping worker for the whole `graceful_timeout`
(then SIGKILL), and `numi serve` cut its sockets without a close frame. Once the turns are
stopped and saved (numi.shutdown), each socket is handed what its relay still holds and is
closed with 1012 (service restart): the worker exits, and the page reconnects to a server
that runs. A socket opened while the process stops is closed the same way at once.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import gevent

from ...services import services

log = logging.getLogger(__name__)

# RFC 6455 §7.4 (IANA registry): the server is restarting; a client should reconnect.
CLOSE_SERVICE_RESTART = 1012

# How long a stopping process waits for its sockets' relays to send the events its turns
# published last (their `turn_end`), and then for the sockets to end.
DRAIN_SECONDS = 3.0


class OpenSocket(Protocol):
    """What the registry needs of a socket's connection (web.live.ws.Connection)."""

    def drained(self) -> bool: ...

    def close_for_restart(self) -> None: ...

    def finished(self) -> bool: ...


class OpenSockets:
    """One per app: the connections being served, and whether the process is stopping."""

    def __init__(self):
        self.connections: set[OpenSocket] = set()
        self.stopping = False


def open_sockets(app) -> OpenSockets:
    """The app's registry of open WebSockets (made in create_app)."""
    return services(app).open_sockets


def close_for_restart(app, timeout: float = DRAIN_SECONDS) -> int:
    """Close every open WebSocket with 1012 once its relay has sent what it holds
    (bounded by `timeout`), then wait (bounded too) for them to end; returns how many
    were closed. Called after the turns are stopped and saved."""
    registry = open_sockets(app)
    registry.stopping = True
    deadline = time.monotonic() + timeout
    while not all(c.drained() for c in list(registry.connections)):
        if time.monotonic() > deadline:
            log.warning("closing WebSockets with events not yet sent")
            break
        gevent.sleep(0.02)
    closing = list(registry.connections)
    for connection in closing:
        connection.close_for_restart()
    deadline = time.monotonic() + timeout
    while not all(c.finished() for c in closing) and time.monotonic() < deadline:
        gevent.sleep(0.02)
    if closing:
        log.info("closed %d WebSocket(s) for the restart (1012)", len(closing))
    return len(closing)
