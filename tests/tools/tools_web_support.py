"""Loopback web servers for the web tool tests: a SearXNG-compatible JSON API and a page
server (an article, redirects to private addresses, a big page, an image)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HOSTILE_TITLE = '<img src=x onerror=alert(1)> "Quotes" & <b>bold</b>'

ARTICLE = f"""<!doctype html><html><head><title>{HOSTILE_TITLE.replace("<", "&lt;")}</title>
<script>var secretScript = 1;</script><style>.x{{color:red}}</style></head>
<body><nav><a href="/">Home</a> | <a href="/menu">Menu item nav-noise</a></nav>
<article><h1>Otters hold hands</h1>
<p>Sea otters hold hands while they sleep so that they do not drift apart. This is called rafting,
and a group of otters floating together is a raft. They also wrap themselves in kelp.</p>
<p>An otter's fur has up to a million hairs per square inch, the densest of any animal, which
keeps it warm in cold water without any blubber at all.</p>
</article><footer>Copyright footer-noise</footer></body></html>"""


class WebServers:
    """A page server and a SearXNG-compatible search server on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.page = self._serve(self._page_handler())
        self.search = self._serve(self._search_handler())

    @property
    def page_url(self) -> str:
        return f"http://127.0.0.1:{self.page.server_address[1]}"

    @property
    def search_url(self) -> str:
        return f"http://127.0.0.1:{self.search.server_address[1]}"

    def _serve(self, handler) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def _page_handler(self):
        servers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                servers.requests.append(self.path)
                port = self.server.server_address[1]
                routes = {
                    "/article": (200, "text/html; charset=utf-8", ARTICLE.encode()),
                    "/plain": (200, "text/plain", b"Just text <script>alert(1)</script>"),
                    "/image": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100),
                    "/big": (200, "text/plain", b"A" * 3_000_000),
                    "/missing": (404, "text/html", b"<p>gone</p>"),
                }
                redirects = {
                    "/to-article": "/article",
                    # 10.0.0.0/8 and link-local: refused before any connection is tried.
                    "/to-private": "http://10.255.255.1/admin",
                    "/to-metadata": "http://169.254.169.254/latest/meta-data/",
                    # Loopback, but not the allowed 127.0.0.1.
                    "/to-other-loopback": f"http://127.0.0.2:{port}/article",
                    # A model list (GET {base}/models) that moves to another loopback address.
                    "/v1/models": f"http://127.0.0.2:{port}/article",
                    "/loop": "/loop",
                }
                path = self.path.split("?")[0]
                if path in redirects:
                    self.send_response(302)
                    self.send_header("Location", redirects[path])
                    self.end_headers()
                    return
                status, content_type, body = routes.get(path, (404, "text/plain", b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def _search_handler(self):
        servers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                servers.requests.append(self.path)
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                if parts.path != "/search" or query.get("format") != ["json"]:
                    self.send_response(403)
                    self.end_headers()
                    return
                q = query.get("q", [""])[0]
                results = [
                    {
                        "title": f"Otters and {q}",
                        "url": f"{servers.page_url}/article",
                        "content": "Sea otters <b>hold hands</b> while sleeping.",
                    },
                    {
                        "title": HOSTILE_TITLE,
                        "url": "https://example.org/otters?a=1&b=<2>",
                        "content": "A second result.",
                    },
                    {"title": "Bad scheme", "url": "javascript:alert(1)", "content": "dropped"},
                ]
                body = json.dumps({"query": q, "results": results}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def close(self) -> None:
        for server in (self.page, self.search):
            server.shutdown()
            server.server_close()
