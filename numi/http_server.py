"""The WSGI handler `numi serve` runs: gevent's, with a deadline on reading a request's
line and headers.

gevent.pywsgi waits for a request's headers as long as the client likes, so a client
that opens connections and sends a header line every few seconds (slowloris) holds a
greenlet and a file descriptor each, for ever. Here the request line and headers must
arrive within `header_timeout` seconds of the handler starting to wait for them (an idle
keep-alive connection included); the body and the response are not limited by it.

A connection that was upgraded to a WebSocket carries no HTTP request after the socket
ends: it is closed then, instead of being read for the next request.
"""

from __future__ import annotations

import socket

import gevent
from gevent.pywsgi import WSGIHandler


class HeaderTimeout(socket.timeout):
    """The request line and headers did not arrive in time (gevent closes the connection)."""


class HeaderDeadlineHandler(WSGIHandler):
    """A WSGIHandler that closes a connection whose request headers are too slow."""

    header_timeout = 10.0  # set from NUMI_HEADER_TIMEOUT_SECONDS by `handler_with_timeout`

    def handle_one_request(self):
        self._deadline = gevent.Timeout.start_new(
            self.header_timeout, HeaderTimeout("request headers too slow")
        )
        try:
            return super().handle_one_request()
        finally:
            self._deadline.cancel()

    def handle_one_response(self):
        super().handle_one_response()
        if self.environ.get("HTTP_UPGRADE", "").lower() == "websocket":
            # The WebSocket (simple_websocket, on a copy of this socket) has ended. Read on,
            # whatever the client still sends on it, e.g. the second close frame of a
            # non-browser client, would be parsed as a request: "Invalid HTTP method" at
            # ERROR, and a connection kept open until the header deadline.
            self.close_connection = True

    def read_request(self, raw_requestline):
        try:
            return super().read_request(raw_requestline)
        finally:
            # The headers are in: the application's own time is not limited here.
            self._deadline.cancel()


def handler_with_timeout(seconds: float) -> type[HeaderDeadlineHandler]:
    """The handler class for `WSGIServer(handler_class=...)` with this header deadline."""
    return type("NumiWSGIHandler", (HeaderDeadlineHandler,), {"header_timeout": seconds})
