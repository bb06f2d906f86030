"""The links a page cites: `fetch_page` gives them with the page (as its source's `links`),
and a research run may follow some of them (numi/agent/research.py).

Only links in the page's text count: navigation, headers, footers, asides, forms and scripts
are skipped, as the readable text skips them, so a site's menu is never followed. Each link
is made absolute against the page's address (after redirects); only http(s) links are kept,
without their fragment, once each, and never the page itself. Whether an address may be
fetched is not decided here: following a link is a `fetch_page`, under its address rules.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

# A page's links kept at most: a long index page names hundreds.
MAX_LINKS = 30
SKIP = {"script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside"}
SKIP |= {"form", "iframe", "head"}


class _LinkCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping = 0
        self.links: list[tuple[str, list[str]]] = []  # (href, the anchor's text parts)
        self._open: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in SKIP:
            self.skipping += 1
        elif tag == "a" and not self.skipping:
            href = dict(attrs).get("href")
            if href:
                self._open = []
                self.links.append((href, self._open))

    def handle_endtag(self, tag):
        if tag in SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag == "a":
            self._open = None

    def handle_data(self, data):
        if self._open is not None and not self.skipping:
            self._open.append(data)


def cited_links(html: str, page_url: str) -> list[dict[str, str]]:
    """The page's links in its text, in reading order: `{"title", "url"}` each."""
    collector = _LinkCollector()
    collector.feed(html)
    page = urldefrag(page_url)[0]
    seen = {page}
    links = []
    for href, words in collector.links:
        url = urldefrag(urljoin(page_url, href.strip()))[0]
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or url in seen:
            continue
        seen.add(url)
        title = " ".join("".join(words).split())[:300] or url
        links.append({"title": title, "url": url})
        if len(links) >= MAX_LINKS:
            break
    return links
