"""A WebSocket client for tests and benchmarks that sends the Host header a browser sends.

simple_websocket 1.1's `Client` sends `Host: 127.0.0.1` without the URL's port. A browser
(RFC 9110 §7.2) puts the port in Host whenever it is not the scheme's default, and Numi's
Origin check reads a port-less Host as the default port: with an `Origin` naming the real
port, such a handshake looks like a page of another port of the same host and is refused.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from simple_websocket import Client


class WebSocketClient(Client):
    """`simple_websocket.Client` whose handshake's Host carries the port, as a browser's."""

    def __init__(self, url, *args, **kwargs):
        parts = urlsplit(url)
        name = parts.hostname or ""
        name = f"[{name}]" if ":" in name else name
        default = 443 if parts.scheme in ("wss", "https") else 80
        port = parts.port or default
        self._host_header = name if port == default else f"{name}:{port}"
        super().__init__(url, *args, **kwargs)

    def handshake(self):
        # The library builds its request from self.host, which also names the address to
        # connect to: swap it only for the request.
        address = self.host
        self.host = self._host_header
        try:
            super().handshake()
        finally:
            self.host = address
