"""Markdown of saved messages for the page: cached, and large texts rendered off the hub.

Rendering is CPU in pure Python. A chat is rendered on every view, so the HTML of a saved
message is kept in a bounded per-process LRU (`HTML`), keyed by the message id and a hash
of everything the rendering depends on (text, citation sources, the markdown cap): an edited
message has another key, so a stale entry can never be shown. A text longer than
`OFF_HUB_CHARS` is rendered in the CPU pool (numi/cpu_pool.py): the page's greenlet waits,
the hub keeps serving other users. The render still holds the GIL, but the interpreter hands
it to the hub's thread every switch interval (5 ms), so another user's request waits
milliseconds (a few hundred at worst on a loaded machine), not the whole render (issue 28,
item 5). The CPU pool is not gevent's, whose threads also resolve host names (issue 34).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from markupsafe import Markup

from ...cpu_pool import run_cpu
from ...render import markdown_cap, render_blocks
from .fragments import blocks_html

# Past this many characters a text is rendered in the CPU pool (below it the hand-off
# costs more than the render).
OFF_HUB_CHARS = 20_000


class HtmlCache:
    """A bounded LRU of rendered message HTML, by entries and by the characters of HTML held.

    `hits` and `misses` count look-ups (a miss is a render)."""

    def __init__(self, max_entries: int = 512, max_chars: int = 16_000_000):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: OrderedDict[tuple, tuple[Markup, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple) -> Markup | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: tuple, html: Markup, size: int) -> None:
        if size > self.max_chars:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[1]
            self._entries[key] = (html, size)
            self._chars += size
            while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


HTML = HtmlCache()


def _render_html(text: str, sources: list | None, cap: int) -> Markup:
    return blocks_html(render_blocks(text, sources, cap=cap))


def render_html(text: str | None, sources: list | None = None, cap: int | None = None) -> Markup:
    """Markdown as the page shows it (`render_blocks` formatted by `blocks_html`), in the
    CPU pool when the text is long (the caller's greenlet waits, the hub does not)."""
    if not text:
        return Markup("")
    cap = markdown_cap() if cap is None else cap
    if len(text) <= OFF_HUB_CHARS:
        return _render_html(text, sources, cap)
    return run_cpu(_render_html, text, sources, cap)


# A question longer than this (in lines or characters) is shown clamped to its first lines,
# with "Show more": a long paste should not push the answer off the screen. Chosen so that a
# question past either limit overflows the clamp (app.css, ten lines) even in the widest bubble.
LONG_QUESTION_LINES = 12
LONG_QUESTION_CHARS = 1000


def long_question(text: str | None) -> bool:
    """Whether a question's text is long enough to be shown collapsed (partials/_message.html)."""
    text = text or ""
    return len(text) > LONG_QUESTION_CHARS or text.count("\n") >= LONG_QUESTION_LINES


def past_cap(message) -> bool:
    """Whether a saved answer is longer than the markdown cap (so shown as plain text)."""
    return message.role != "user" and len(message.content or "") > markdown_cap()


def message_html(message, field: str = "content", cap: int | None = None) -> Markup:
    """The rendered markdown of a saved message's `content` (with its citations) or
    `reasoning_content`, from the cache when this exact text was rendered before; `cap`
    overrides the markdown cap (the "Show as markdown" control)."""
    html = cached_html(message, field, cap)
    return render_and_cache(message, field, cap) if html is None else html


def cached_html(message, field: str = "content", cap: int | None = None) -> Markup | None:
    """`message_html` if this exact text was rendered before (or is empty), else None."""
    text = getattr(message, field, None)
    if not text:
        return Markup("")
    return HTML.get(_message_key(message, field, cap))


def render_and_cache(message, field: str = "content", cap: int | None = None) -> Markup:
    """Render `message_html` now (in the CPU pool if long) and keep it in the cache."""
    text = getattr(message, field, None)
    if not text:
        return Markup("")
    sources = linked_sources(message) if field == "content" else None
    cap = markdown_cap() if cap is None else cap
    html = render_html(text, sources, cap)
    HTML.put(_message_key(message, field, cap), html, len(html))
    return html


def passage_link(message, number: int) -> str:
    """Where citation `number` of a saved answer opens its document's passage (the route
    `library.answer_source`; built by hand: a message renders outside a request too)."""
    return f"/c/{message.chat_id}/messages/{message.id}/sources/{int(number)}"


def linked_sources(message) -> list:
    """The answer's citation sources, each passage of a document with the `link` its
    marker opens (`render.blocks.cite`)."""
    sources = []
    for index, source in enumerate(message.citation_sources or (), 1):
        if isinstance(source, dict) and isinstance(source.get("attachment_id"), int):
            source = {**source, "link": passage_link(message, source.get("n") or index)}
        sources.append(source)
    return sources


def _message_key(message, field: str, cap: int | None) -> tuple:
    # Everything the rendering depends on: an edited text or new sources make a new key.
    text = getattr(message, field)
    sources = message.citation_sources if field == "content" else None
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    if sources:
        digest.update(json.dumps(sources, sort_keys=True, default=str).encode())
    cap = markdown_cap() if cap is None else cap
    return (str(message.id), field, cap, len(text), digest.digest())
