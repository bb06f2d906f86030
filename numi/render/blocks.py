"""Markdown rendered as its list of top-level blocks: the one renderer for every message,
title preview and export (`render_blocks`, `render_markdown`), with the artifacts a message's
closed fences make (`artifacts`) and citation links (`cite`).

The page wraps code blocks in its own chrome (language label, Copy button) from a template;
the streaming view (`numi.render.stream`) cuts the text at the same block boundaries, so a
streamed answer ends up exactly as a reload shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flask import current_app, has_app_context
from markupsafe import Markup, escape

from .artifacts import Artifact, artifact_kind, fenced_artifacts, too_large
from .markdown import parser
from .sanitize import sanitize


@dataclass(frozen=True)
class Block:
    """One top-level block of rendered markdown: sanitised HTML, and for code its language."""

    html: Markup
    kind: str = "text"  # "code" for a fenced or indented code block
    lang: str = ""
    # For a closed fence that previews (numi.render.artifacts): its kind, and "artifact_too_large"
    # in `refused` when it is over the preview limit.
    artifact: str = ""
    refused: str = ""


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
    (top-level closed fences only, as `render_blocks` marks them); past the markdown cap,
    where the page shows plain text, its fences found line by line (`fenced_artifacts`)."""
    if not text:
        return []
    if len(text) > markdown_cap():
        return [artifact for _, _, artifact in fenced_artifacts(text)]
    found = []
    for token in parser().parse(text, {}):
        if token.level == 0 and token.type == "fence":
            artifact = _artifact(token)
            if artifact is not None:
                found.append(artifact)
    return found


def _parse(text: str, env: dict):
    md = parser()
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
        # (issue 28, item 5). Past the cap the text is shown as it is, escaped, its
        # artifacts as code blocks that preview.
        return plain_blocks(text)
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
    """Each citation marker [n] whose source has an http(s) URL, or a `link` on this site
    (a document's passage: message_render.py gives it), becomes a markdown link to it, so
    the sanitiser sees it like any other link."""
    urls = {}
    for index, source in enumerate(sources or (), 1):
        if not isinstance(source, dict):
            continue
        url = source.get("url") if isinstance(source.get("url"), str) else source.get("link")
        if isinstance(url, str) and not any(c in url for c in " <>()"):
            if url.lower().startswith(("http://", "https://")) or (
                url.startswith("/") and not url.startswith("//")
            ):
                urls[str(source.get("n") or index)] = url
    if text and urls:
        text = _CITATION.sub(
            lambda m: f"[[{m.group(1)}]]({urls[m.group(1)]})" if m.group(1) in urls else m.group(0),
            text,
        )
    return text


def plain_blocks(text: str) -> list[Block]:
    """A text past the markdown cap: escaped text, and each artifact fence as a code block
    that previews (its source escaped, as a rendered fence's is)."""
    blocks: list[Block] = []
    shown = 0
    for start, end, artifact in fenced_artifacts(text):
        if start > shown:
            blocks.append(plain_block(text[shown:start]))
        code = Markup('<pre><code class="language-%s">%s</code></pre>') % (
            artifact.lang,
            artifact.code if not artifact.refused else _fence_body(text[start:end]),
        )
        blocks.append(Block(code, "code", artifact.lang, artifact.kind, artifact.refused))
        shown = end
    if shown < len(text) or not blocks:
        blocks.append(plain_block(text[shown:]))
    return blocks


def _fence_body(fence: str) -> str:
    """The lines between a fence's opening and closing lines."""
    lines = fence.splitlines(keepends=True)
    return "".join(lines[1:-1])
