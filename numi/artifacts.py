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
