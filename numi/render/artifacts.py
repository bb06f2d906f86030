"""Artifacts: the HTML, SVG and Mermaid a model writes in fenced code blocks, previewed live.

A fenced block whose language is `html`, `svg` or `mermaid` (or `xml` whose root element is
`<svg>`) is an artifact once its closing fence has arrived. The page shows it in a frame of
its own (`web/artifacts.py` serves that frame's document): sandboxed with scripts but no
same origin, under a policy that lets it fetch nothing, so what a model wrote can run and
still never reach the page, its cookie or the API. A block over `MAX_ARTIFACT_BYTES` is
shown as code only, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ARTIFACT_BYTES = 1_000_000

# The fence languages that preview as each kind (the first word of the info string).
KINDS = {"html": "html", "htm": "html", "svg": "svg", "mermaid": "mermaid", "mmd": "mermaid"}

# An XML block previews as SVG when its root element is <svg>: after an optional XML
# declaration, comments and a doctype.
_SVG_ROOT = re.compile(
    r"^\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*|<!DOCTYPE[^>]*>\s*)*<svg[\s>]", re.I | re.S
)


@dataclass(frozen=True)
class Artifact:
    """One previewable block: its kind, the fence's language and its source (or, for a
    block too large to preview, `refused` with the code of the reason)."""

    kind: str
    lang: str
    code: str
    refused: str = ""

    def to_dict(self) -> dict:
        if self.refused:
            return {"kind": self.kind, "lang": self.lang, "error": refusal(self.refused)}
        return {"kind": self.kind, "lang": self.lang, "code": self.code}


def artifact_kind(lang: str, code: str) -> str:
    """The kind a fenced block previews as ("html", "svg", "mermaid"), or "" for none."""
    lang = lang.lower()
    if lang in KINDS:
        return KINDS[lang]
    if lang == "xml" and _SVG_ROOT.match(code[:4096]):
        return "svg"
    return ""


def too_large(code: str) -> bool:
    """Whether a block is over the preview limit (its UTF-8 size, measured cheaply)."""
    return len(code) > MAX_ARTIFACT_BYTES or len(code.encode()) > MAX_ARTIFACT_BYTES


# Why a block is not previewed: shown beside it, and in the artifacts API in its place.
TOO_LARGE = {
    "code": "artifact_too_large",
    "message": f"Too large to preview (over {MAX_ARTIFACT_BYTES // 1_000_000} MB): shown as code.",
}


def refusal(code: str) -> dict:
    """The stable error of a block that is not previewed."""
    return {TOO_LARGE["code"]: TOO_LARGE}[code]


# A fence line (CommonMark): up to 3 spaces, then 3 or more backticks or tildes; an
# opening one may have an info string (a backtick fence's has no backtick).
_OPENING = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})(.*)")


def fenced_artifacts(text: str) -> list[tuple[int, int, Artifact]]:
    """The artifacts of a text too long to parse as markdown, found line by line: each
    closed fence at the start of a line (up to 3 spaces in) whose language previews, as
    (its first character, the character after its closing fence, the artifact).

    A markdown parse of a long answer is seconds of CPU on the hub (so the page shows it
    as plain text past NUMI_MARKDOWN_MAX_CHARS); finding its fences is one pass over its
    lines. Unlike the parser it does not tell a fence in a list or a quote from a
    top-level one; the page and the artifacts API count alike either way."""
    found = []
    position = 0
    fence: tuple[str, int, int, str, int] | None = None  # marker, indent, start, lang, body
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            match = _OPENING.fullmatch(bare)
            if match is not None:
                indent = len(bare) - len(bare.lstrip(" "))
                lang = (match.group(2).split() or [""])[0][:40]
                fence = (match.group(1), indent, position, lang, position + len(line))
        else:
            marker, indent, start, lang, body = fence
            stripped = bare.strip(" \t")
            if (
                len(bare) - len(bare.lstrip(" ")) <= 3
                and stripped.startswith(marker)
                and not stripped.strip(marker[0])
            ):
                fence = None
                artifact = _fenced(lang, _unindented(text[body:position], indent))
                if artifact is not None:
                    found.append((start, position + len(line), artifact))
        position += len(line)
    return found


def _fenced(lang: str, code: str) -> Artifact | None:
    kind = artifact_kind(lang, code) if lang else ""
    if not kind:
        return None
    if too_large(code):
        return Artifact(kind, lang, "", refused="artifact_too_large")
    return Artifact(kind, lang, code)


def _unindented(code: str, indent: int) -> str:
    """A fence's content as CommonMark gives it: up to the opening fence's indentation of
    spaces taken off each line."""
    if not indent:
        return code
    return "".join(
        line[min(indent, len(line) - len(line.lstrip(" "))) :]
        for line in code.splitlines(keepends=True)
    )
