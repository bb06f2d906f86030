"""A local search and page server for research runs: a SearXNG-compatible `/search` whose
results point at this server's own pages, a count of every page fetch, pages that are
refused or not text, and a page held until the test lets it go (to stop a run mid-read)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import gevent

from sqlalchemy import select

from numi.agent.tools import web as web_tools
from numi.extensions import db
from numi.identity import local_user
from numi.models import Message, ResearchRun, ResearchSource
from server_wait import WAIT_SECONDS

PAGE = """<!doctype html><html><head><title>{title}</title></head><body>
<nav><a href="/page/menu-1">Home</a></nav><article>
<h1>{title}</h1><p>{body}</p>{links}</article></body></html>"""


class ResearchWeb:
    """One loopback server: `/search?q=..&format=json` and `/page/<name>`."""

    def __init__(self) -> None:
        self.fetches: Counter[str] = Counter()
        self.searches: list[str] = []
        # query words -> the page names its results list (default: two pages per query).
        self.results: dict[str, list[str]] = {}
        # page name -> the addresses its text links to (a name is one of this server's pages)
        self.links: dict[str, list[str]] = {}
        self.held: set[str] = set()  # pages that wait for `release` before answering
        self.release = threading.Event()
        self.fetching = threading.Event()  # set when a held page is being fetched
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reset(self) -> None:
        self.fetches.clear()
        self.searches.clear()
        self.results.clear()
        self.links.clear()
        self.held.clear()
        self.release.clear()
        self.fetching.clear()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        web = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path == "/search":
                    query = parse_qs(parts.query).get("q", [""])[0]
                    web.searches.append(query)
                    names = web.results.get(query) or [f"{query.split()[0]}-{n}" for n in (1, 2)]
                    results = [
                        {
                            "title": f"About {name}",
                            "url": name if name.startswith("http") else f"{web.url}/page/{name}",
                            "content": "…",
                        }
                        for name in names
                    ]
                    return self._send(200, "application/json", json.dumps({"results": results}))
                name = parts.path.removeprefix("/page/")
                web.fetches[name] += 1
                if name in web.held:
                    web.fetching.set()
                    web.release.wait(30)
                if name.startswith("image"):
                    return self._send(200, "image/png", "\x89PNG")
                if name.startswith("gone"):
                    return self._send(404, "text/plain", "gone")
                body = f"Facts about {name}: <script>alert(1)</script> " + "word " * 50
                title = f"Page {name} <b>bold</b>"
                links = "".join(
                    f'<p>See <a href="{href}">{href.rsplit("/", 1)[-1]}</a>.</p>'
                    for href in web.links.get(name, [])
                )
                page = PAGE.format(
                    title=title.replace("<", "&lt;"), body=body.replace("<", "&lt;"), links=links
                )
                return self._send(200, "text/html; charset=utf-8", page)

            def _send(self, status, content_type, text):
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def drain(subscription) -> list[dict]:
    """The events a subscription holds now."""
    events = []
    while not subscription.queue.empty():
        events.append(subscription.queue.get_nowait())
    return events


def wait_for(condition, what: str) -> None:
    """Until `condition()`; the deadline (WAIT_SECONDS) only catches a hang: 30 s failed
    the takeover test at load 55, where it passes alone."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"waited too long for {what}"
        gevent.sleep(0.01)


def search_on_server(server, url: str) -> None:
    """A live server's user searches `url` (Settings → Web search, as the page's form posts
    it; loopback allowed, as an administrator may)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = {"search_backend": "searxng", "searxng_url": url, "allowed_hosts": ["127.0.0.1"]}
    try:
        connection.request(
            "POST",
            "/settings/web-search",
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "HX-Request": "true", **server.headers},
        )
        assert connection.getresponse().status == 200
    finally:
        connection.close()


def search_locally(app, url: str) -> None:
    """An in-process app's local user searches `url` (loopback allowed, as an admin may)."""
    with app.app_context():
        web_tools.save_settings(
            local_user().id,
            {"search_backend": "searxng", "searxng_url": url, "allowed_hosts": ["127.0.0.1"]},
        )
        db.session.commit()


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def answer(app, chat_id):
    with app.app_context():
        return (
            db.session.execute(
                select(Message).where(Message.chat_id == chat_id, Message.role == "assistant")
            )
            .scalars()
            .all()
        )


def run_row(app, chat_id) -> tuple[ResearchRun, list[ResearchSource]]:
    with app.app_context():
        run = db.session.execute(
            select(ResearchRun).where(ResearchRun.chat_id == chat_id)
        ).scalar_one()
        rows = (
            db.session.execute(
                select(ResearchSource)
                .where(ResearchSource.run_id == run.id)
                .order_by(ResearchSource.id)
            )
            .scalars()
            .all()
        )
        db.session.expunge_all()
        return run, rows
