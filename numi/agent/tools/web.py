"""`web_search` and `fetch_page`: the web, with numbered sources the answer cites.

The search backend is the user's choice (Settings → Web search): a SearXNG instance (its
JSON API, `/search?q=...&format=json`) or Brave Search with an API key. Both tools return
a `ToolResult` whose sources the runtime numbers and saves on the answer.

Every outgoing request goes through `guarded_get`: the host is resolved, EVERY address it
resolves to must be public (not private, loopback, link-local, reserved, ...) unless an
admin allowed private addresses or listed the host/network (numi/addresses.py: a
non-admin may not save such an override, and one stored anyway is ignored at use), the
connection goes to the address that was checked (a second DNS answer cannot swap it), and
each redirect is checked again the same way. Bodies are capped in size and the whole
fetch in time.

Readable text comes from readability-lxml (the optional `web` extra: lxml is ~17 MB, so it
stays out of the base install) and falls back to a stdlib HTML-to-text pass without it.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import re
import socket
import ssl
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import gevent
from flask import current_app

from ...addresses import AddressPolicy, AddressRefused, check_host, check_url
from ...cpu_pool import run_cpu
from ...crypto import seal, unseal
from ...extensions import db
from ...models import ToolSettings
from ...setting_values import parse_bool
from ...errors import NumiError, invalid
from . import Tool, ToolContext, ToolFailure, ToolResult
from .page_links import cited_links

log = logging.getLogger(__name__)

SEARCH_BACKENDS = ("", "searxng", "brave")
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
MAX_REDIRECTS = 5
USER_AGENT = "Numi/0.1 (+self-hosted chat; page fetch tool)"
TEXT_TYPES = ("text/plain", "text/markdown", "application/json", "text/csv")
HTML_TYPES = ("text/html", "application/xhtml+xml")


class FetchRefused(Exception):
    """A URL the tools will not request (scheme, address, size); the message says why."""

    def __init__(self, message: str, code: str = "fetch_failed"):
        super().__init__(message)
        self.code = code


# --- per-user settings ---------------------------------------------------------------------


def load_settings(user_id: int) -> dict[str, Any]:
    """The user's web tool settings (empty dict when never saved)."""
    row = db.session.get(ToolSettings, user_id)
    settings = dict(row.settings) if row is not None else {}
    db.session.commit()  # end the read: a fetch may take a while
    return settings


def save_settings(user_id: int, raw: dict[str, Any], is_admin: bool = True) -> dict[str, Any]:
    """Validate and store the web settings form; a bad field raises and changes nothing.

    An empty `brave_api_key` keeps the stored key (the form never shows it back);
    `clear_brave_api_key` removes it. Only an admin may allow private addresses (403
    `admin_only` otherwise).
    """
    backend = (raw.get("search_backend") or "").strip()
    if backend not in SEARCH_BACKENDS:
        raise invalid(
            "search_backend must be searxng or brave (or empty for none).", "invalid_backend"
        )
    searxng_url = (raw.get("searxng_url") or "").strip()
    if searxng_url and not _is_web_url(searxng_url):
        raise invalid("The SearXNG URL must start with http:// or https://.", "invalid_url")
    if len(searxng_url) > 500:
        raise invalid("The SearXNG URL is too long.", "too_long")
    if backend == "searxng" and not searxng_url:
        raise invalid("Give the SearXNG instance URL.", "missing_url")
    hosts = raw.get("allowed_hosts") or []
    if isinstance(hosts, str):
        hosts = [h for h in re.split(r"[\s,]+", hosts) if h]
    if (
        not isinstance(hosts, list)
        or len(hosts) > 50
        or not all(isinstance(h, str) and 0 < len(h) <= 253 for h in hosts)
    ):
        raise invalid("allowed_hosts must be at most 50 host names, addresses or networks.")
    for host in hosts:
        if "/" in host:
            try:
                ipaddress.ip_network(host, strict=False)
            except ValueError:
                raise invalid(
                    f"{host!r} is not a network (like 10.0.0.0/8).", "invalid_host"
                ) from None
        elif not re.fullmatch(r"[A-Za-z0-9.:\-\[\]]+", host):
            raise invalid(f"{host!r} is not a host name or address.", "invalid_host")
    if not is_admin and (parse_bool(raw.get("allow_private")) or hosts):
        raise NumiError(
            "admin_only", "Only an administrator can allow private or local addresses.", 403
        )
    if not is_admin and searxng_url:
        try:
            check_url(searxng_url, resolvable=False)
        except AddressRefused as exc:
            raise exc.to_error() from None
    key = raw.get("brave_api_key")
    if key is not None and (not isinstance(key, str) or len(key) > 200):
        raise invalid("The API key is too long.", "too_long")

    row = db.session.get(ToolSettings, user_id)
    if row is None:
        row = ToolSettings(user_id=user_id)
        db.session.add(row)
    settings = dict(row.settings)
    settings.update(
        search_backend=backend or None,
        searxng_url=searxng_url or None,
        allow_private=parse_bool(raw.get("allow_private")),
        allowed_hosts=[h.lower() for h in hosts],
    )
    if raw.get("clear_brave_api_key"):
        settings.pop("brave_api_key", None)
    elif key and key.strip():
        settings["brave_api_key"] = seal(key.strip())  # stored sealed, like endpoint keys
    if backend == "brave" and not settings.get("brave_api_key"):
        db.session.rollback()
        raise invalid("Brave Search needs an API key.", "missing_key")
    row.settings = settings
    db.session.commit()
    return settings


# --- guarded HTTP --------------------------------------------------------------------------


@dataclass
class Page:
    url: str  # after redirects
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool

    def text(self) -> str:
        return self.body.decode(self.charset or "utf-8", "replace")


def _web_host(url: str) -> str | None:
    """The host of an http:// or https:// URL; None for any other URL."""
    parts = urlsplit(url)
    return parts.hostname if parts.scheme in ("http", "https") and parts.hostname else None


def _is_web_url(url: str) -> bool:
    return _web_host(url) is not None


def usable_settings(settings: dict[str, Any], is_admin: bool) -> dict[str, Any]:
    """The settings a tool call may use: a non-admin's address overrides never apply."""
    if is_admin:
        return settings
    return {**settings, "allow_private": False, "allowed_hosts": []}


def check_address(host: str, port: int, settings: dict[str, Any]) -> str:
    """Resolve `host`; refuse unless every address may be contacted. Returns the one to use."""
    host = host.lower().strip("[]")
    policy = AddressPolicy(
        bool(settings.get("allow_private")),
        tuple(h for h in settings.get("allowed_hosts") or () if isinstance(h, str)),
    )
    try:
        return check_host(host, port, policy)
    except AddressRefused as exc:
        if exc.address is None:
            raise FetchRefused(f"The host {host} could not be resolved.") from None
        # The address stays in the log: naming it to the model would make the tool an oracle
        # for the server's internal DNS.
        log.info("fetch_page refused %s: resolves to %s", host, exc.address)
        raise FetchRefused(
            f"Refused: {host} resolves to a private, loopback or otherwise internal "
            "address. An administrator can allow it in Settings → Web search.",
            "address_refused",
        ) from None


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to the address that was checked, not a fresh DNS answer."""

    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float):
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def guarded_get(
    url: str,
    settings: dict[str, Any],
    *,
    max_bytes: int,
    timeout: float,
    headers: dict[str, str] | None = None,
) -> Page:
    """GET `url` within the address rules, following at most 5 redirects (each re-checked)."""
    with gevent.Timeout(timeout, FetchRefused(f"The request took longer than {timeout:g} s.")):
        for _ in range(MAX_REDIRECTS + 1):
            host = _web_host(url)
            if host is None:
                raise FetchRefused("Only http:// and https:// URLs can be fetched.")
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            address = check_address(host, port, settings)
            kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
            connection = kind(host, port, address, timeout)
            try:
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                connection.request(
                    "GET",
                    path,
                    headers={
                        "User-Agent": USER_AGENT,
                        "Accept-Encoding": "identity",
                        "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
                        **(headers or {}),
                    },
                )
                response = connection.getresponse()
                location = response.getheader("Location")
                if response.status in (301, 302, 303, 307, 308) and location:
                    url = urljoin(url, location)
                    continue
                body = response.read(max_bytes + 1)
                content_type = (
                    (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
                )
                charset = _charset(response.getheader("Content-Type") or "")
                return Page(
                    url,
                    response.status,
                    content_type,
                    charset,
                    body[:max_bytes],
                    len(body) > max_bytes,
                )
            except (OSError, http.client.HTTPException) as exc:
                log.info("fetch_page request to %s failed: %r", parts.hostname, exc)
                raise FetchRefused(
                    f"The request to {parts.hostname} failed ({type(exc).__name__})."
                ) from None
            finally:
                connection.close()
        raise FetchRefused(f"Too many redirects (more than {MAX_REDIRECTS}).")


def _charset(content_type: str) -> str | None:
    match = re.search(r"charset=([\w\-]+)", content_type, re.I)
    if not match:
        return None
    try:
        "".encode(match.group(1))
    except LookupError:
        return None
    return match.group(1)


# --- readable text -------------------------------------------------------------------------


class _TextExtractor(HTMLParser):
    """HTML to plain text: block elements become line breaks; scripts, styles, navigation
    and forms are dropped."""

    SKIP = {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "nav",
        "header",
        "footer",
        "aside",
        "form",
        "iframe",
        "head",
    }
    BLOCK = {
        "p",
        "div",
        "section",
        "article",
        "main",
        "li",
        "ul",
        "ol",
        "br",
        "tr",
        "table",
        "pre",
        "blockquote",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "dt",
        "dd",
        "hr",
        "figure",
        "figcaption",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")
            if tag == "li":
                self.parts.append("- ")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if not self.skipping:
            self.parts.append(data)

    def text(self) -> str:
        lines = [
            re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(self.parts).split("\n")
        ]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str) -> tuple[str, str]:
    """(title, readable text) of an HTML page: readability's main content when the `web`
    extra is installed, else the whole page minus navigation and scripts."""
    try:
        from readability import Document  # lazy: optional extra web
    except ImportError:
        Document = None
    plain = _TextExtractor()
    plain.feed(html)
    title = plain.title.strip()
    if Document is not None:
        try:
            document = Document(html)
            title = document.short_title() or title
            main = _TextExtractor()
            main.feed(document.summary(html_partial=True))
            text = main.text()
            if len(text) >= 200 or len(text) >= len(plain.text()) // 2:
                return title, text
        except Exception:  # readability gives up on odd pages: the plain pass still works
            pass
    return title, plain.text()


# --- the tools -----------------------------------------------------------------------------


def _limits() -> tuple[int, float]:
    config = current_app.config
    return config["NUMI_FETCH_MAX_BYTES"], config["NUMI_FETCH_TIMEOUT_SECONDS"]


def _web_search(arguments: dict, context: ToolContext) -> ToolResult | str:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolFailure("invalid_arguments", "Error: give a query to search for.")
    count = arguments.get("count", 5)
    count = max(1, min(int(count), 10)) if isinstance(count, int | float) else 5
    settings = usable_settings(load_settings(context.user_id), context.is_admin)
    backend = settings.get("search_backend")
    max_bytes, timeout = _limits()
    try:
        if backend == "searxng":
            base = settings["searxng_url"].rstrip("/")
            page = guarded_get(
                f"{base}/search?{urlencode({'q': query, 'format': 'json'})}",
                settings,
                max_bytes=max_bytes,
                timeout=timeout,
                headers={"Accept": "application/json"},
            )
            results = [
                {"title": r.get("title"), "url": r.get("url"), "content": r.get("content")}
                for r in _json(page).get("results") or []
                if isinstance(r, dict)
            ]
        elif backend == "brave":
            page = guarded_get(
                f"{BRAVE_URL}?{urlencode({'q': query, 'count': count})}",
                settings,
                max_bytes=max_bytes,
                timeout=timeout,
                headers={"Accept": "application/json", "X-Subscription-Token": brave_key(settings)},
            )
            web = _json(page).get("web") or {}
            results = [
                {"title": r.get("title"), "url": r.get("url"), "content": r.get("description")}
                for r in web.get("results") or []
                if isinstance(r, dict)
            ]
        else:
            raise ToolFailure(
                "not_configured",
                "Error: web search is not set up. The user can choose a "
                "search backend in Settings → Web search.",
            )
    except FetchRefused as exc:
        raise ToolFailure(exc.code, f"Error: the search failed: {exc}") from None
    sources = []
    for result in results:
        url = result.get("url")
        if not isinstance(url, str) or not _is_web_url(url):
            continue  # only links a browser may safely open
        title = str(result.get("title") or url)[:300]
        snippet = re.sub(r"<[^>]+>", "", str(result.get("content") or ""))[:1000]
        sources.append({"title": title, "url": url, "content": snippet})
        if len(sources) >= count:
            break
    if not sources:
        return f"No results for {query!r}."
    return ToolResult(f"Search results for {query!r} (cite them by number, like [1]):", sources)


def brave_key(settings: dict[str, Any]) -> str:
    """The user's Brave Search key in plaintext (stored sealed; legacy plaintext reads too)."""
    stored = settings.get("brave_api_key")
    return unseal(stored) if isinstance(stored, str) and stored else ""


def _json(page: Page) -> dict[str, Any]:
    if page.status != 200:
        raise FetchRefused(f"the search backend answered HTTP {page.status}.")
    try:
        data = json.loads(page.text())
    except ValueError:
        raise FetchRefused(
            "the search backend did not answer JSON (is format=json enabled?)."
        ) from None
    if not isinstance(data, dict):
        raise FetchRefused("the search backend answered an unexpected JSON value.")
    return data


def _fetch_page(arguments: dict, context: ToolContext) -> ToolResult | str:
    url = arguments.get("url")
    if not isinstance(url, str) or not _is_web_url(url.strip()):
        raise ToolFailure("invalid_arguments", "Error: give an http:// or https:// URL.")
    max_chars = arguments.get("max_chars", 12000)
    max_chars = (
        max(500, min(int(max_chars), 50000)) if isinstance(max_chars, int | float) else 12000
    )
    settings = usable_settings(load_settings(context.user_id), context.is_admin)
    max_bytes, timeout = _limits()
    try:
        page = guarded_get(url.strip(), settings, max_bytes=max_bytes, timeout=timeout)
    except FetchRefused as exc:
        raise ToolFailure(exc.code, f"Error: {exc}") from None
    if page.status >= 400:
        raise ToolFailure("http_error", f"Error: {page.url} answered HTTP {page.status}.")
    if page.content_type in HTML_TYPES or (
        not page.content_type and b"<html" in page.body[:2000].lower()
    ):
        # Parsing a large page is CPU work: do it off the hub.
        html = page.text()
        title, text = run_cpu(html_to_text, html)
        links = run_cpu(cited_links, html, page.url)
    elif page.content_type in TEXT_TYPES or page.content_type.startswith("text/"):
        title, text, links = page.url, page.text(), []
    else:
        return (
            f"Error: {page.url} is not a text page (content type {page.content_type or 'unknown'})."
        )
    notes = []
    if page.truncated:
        notes.append(f"the page was larger than {max_bytes} bytes; only the start was read")
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"the text was cut at {max_chars} characters")
    header = (
        f"Fetched {page.url}" + (f" ({'; '.join(notes)})" if notes else "") + ". Cite it by number."
    )
    # `links` (not saved on an answer: only a source's plain values are) is what research
    # may follow.
    source = {"title": (title or page.url).strip()[:300], "url": page.url, "content": text}
    return ToolResult(header, [{**source, "links": links}])


WEB_SEARCH = Tool(
    name="web_search",
    description="Search the web. Returns numbered results (title, URL, snippet); cite them in the answer as [n].",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "count": {"type": "integer", "description": "How many results (1-10, default 5)."},
        },
        "required": ["query"],
    },
    run=_web_search,
)

FETCH_PAGE = Tool(
    name="fetch_page",
    description="Fetch a web page and return its readable text, numbered as a source to cite as [n].",
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "An http:// or https:// URL."},
            "max_chars": {
                "type": "integer",
                "description": "Most characters of text to return (default 12000).",
            },
        },
        "required": ["url"],
    },
    run=_fetch_page,
)

__all__ = [
    "WEB_SEARCH",
    "FETCH_PAGE",
    "guarded_get",
    "check_address",
    "html_to_text",
    "load_settings",
    "save_settings",
    "FetchRefused",
]
