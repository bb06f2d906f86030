"""Chunks that know where they came from.

A document's text is cut along its own structure before it is packed into chunks of about
CHUNK_CHARS characters, so each chunk can say where it was found:

- Markdown (and HTML, whose `<h1>`..`<h6>` become headings, and DOCX, whose heading styles
  became `#` lines when its text was read) by headings: a chunk keeps its heading path
  ("Install › From a wheel");
- code by top-level function or class: a chunk keeps the definition's name and its lines;
- a PDF's text (read page by page, `[page N]` lines between them) by page: a chunk keeps its
  page number;
- anything else by paragraphs, as before.

Pure CPU work on text: the indexer runs it in the CPU pool (numi/cpu_pool.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

CHUNK_CHARS = 1200
OVERLAP_CHARS = 200

CODE_SUFFIXES = (
    ".py", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".rb", ".php",
    ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".scala", ".lua", ".sh",
)  # fmt: skip
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".rst")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_PAGE = re.compile(r"^\[page (\d+)\]$")
# A top-level definition in the common languages: where a reader would start a new piece.
_DEFINITION = re.compile(
    r"^(?:@|(?:export\s+)?(?:default\s+)?(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?"
    r"(?:def|class|function|func|fn|interface|struct|impl|enum|trait|module|type)\b)"
)
_NAME = re.compile(
    r"\b(?:def|class|function|func|fn|interface|struct|impl|enum|trait|module|type)\s+([\w.]+)"
)


@dataclass(frozen=True)
class Chunk:
    """One searchable passage and where it sits in its document."""

    text: str
    heading: str | None = None  # "Part › Section" (markdown, HTML), or "def name" (code)
    page: int | None = None  # a PDF's page, from 1
    line_start: int | None = None  # code: the definition's lines, from 1
    line_end: int | None = None

    def where(self) -> dict[str, object]:
        """Where the passage was found, as the API and the context panel say it."""
        found: dict[str, object] = {}
        if self.heading:
            found["heading"] = self.heading
        if self.page:
            found["page"] = self.page
        if self.line_start:
            found["lines"] = [self.line_start, self.line_end]
        return found


def chunk_text(value: str, *, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Split text into overlapping chunks of about `size` characters along paragraphs."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", value or ""):
        paragraph = " ".join(paragraph.split())
        while len(paragraph) > size:  # a paragraph longer than a chunk: cut at a space
            cut = paragraph.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            pieces.append(paragraph[:cut])
            paragraph = paragraph[cut:].lstrip()
        if paragraph:
            pieces.append(paragraph)
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > size:
            chunks.append(current)
            tail = current[-overlap:] if overlap else ""
            space = tail.find(" ")
            current = (tail[space + 1 :] if space >= 0 else tail) if overlap else ""
            current = f"{current} … {piece}" if current else piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def chunk_document(text: str, filename: str, mime: str = "text/plain") -> list[Chunk]:
    """The chunks of one document, cut along its structure (see the module's docstring)."""
    name = (filename or "").lower()
    if mime == "application/pdf" or _PAGE.match((text or "").lstrip().split("\n", 1)[0]):
        return _by_page(text)
    if name.endswith(HTML_SUFFIXES) or mime == "text/html":
        return _by_heading(html_to_markdown(text))
    if name.endswith(MARKDOWN_SUFFIXES) or mime in ("text/markdown", DOCX_MIME):
        # A DOCX's text has its headings as `#` lines (numi/chat/docx_extract.py).
        return _by_heading(text)
    if name.endswith(CODE_SUFFIXES):
        return _by_definition(text)
    return [Chunk(piece) for piece in chunk_text(text)]


def _by_heading(text: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    section: list[str] = []
    fenced = False

    def flush() -> None:
        heading = " › ".join(title for _, title in path) or None
        body = section[1:] if heading else section
        if any(line.strip() for line in body):  # a heading alone is no passage
            text = "\n".join(section)
            chunks.extend(Chunk(piece, heading=heading) for piece in chunk_text(text))
        section.clear()

    for line in (text or "").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced  # a `#` inside a code block is no heading
        found = None if fenced else _HEADING.match(line)
        if found:
            flush()
            level = len(found.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, found.group(2)))
            section.append(found.group(2))  # the heading's words are searchable in its chunk
        else:
            section.append(line)
    flush()
    return chunks


def _by_page(text: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    page: int | None = None
    lines: list[str] = []

    def flush() -> None:
        chunks.extend(Chunk(piece, page=page) for piece in chunk_text("\n".join(lines)))
        lines.clear()

    for line in (text or "").splitlines():
        found = _PAGE.match(line.strip())
        if found:
            flush()
            page = int(found.group(1))
        else:
            lines.append(line)
    flush()
    return chunks


def _by_definition(text: str, size: int = CHUNK_CHARS * 2) -> list[Chunk]:
    """Code cut at top-level definitions (a decorator stays with what it decorates); a
    definition longer than `size` is cut at line boundaries, each piece with its lines."""
    lines = (text or "").splitlines()
    starts = [0]
    for number, line in enumerate(lines):
        if number and _DEFINITION.match(line) and not _DEFINITION.match(lines[number - 1] or " "):
            starts.append(number)
    starts.append(len(lines))
    chunks: list[Chunk] = []
    for begin, end in zip(starts, starts[1:]):
        found = next((_NAME.search(line) for line in lines[begin:end] if _NAME.search(line)), None)
        heading = found.group(0) if found and _DEFINITION.match(lines[begin]) else None
        piece_start, size_so_far = begin, 0
        for number in range(begin, end + 1):
            at_end = number == end
            if at_end or (size_so_far > size and number > piece_start):
                filled = [n for n in range(piece_start, number) if lines[n].strip()]
                if filled:  # its lines, without the blank ones around it
                    body = "\n".join(lines[filled[0] : filled[-1] + 1])
                    chunks.append(Chunk(body, heading, None, filled[0] + 1, filled[-1] + 1))
                piece_start, size_so_far = number, 0
            if not at_end:
                size_so_far += len(lines[number]) + 1
    return chunks


class _HtmlText(HTMLParser):
    """HTML as markdown-ish text: headings become `#` lines, block ends break lines, script
    and style are dropped. Only the structure matters here; the text is never rendered."""

    BLOCKS = {"p", "div", "li", "tr", "br", "section", "article", "pre", "table", "ul", "ol"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style", "template"):
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCKS:
            self.out.append("\n\n" if tag == "p" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template"):
            self.skip = max(0, self.skip - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCKS:
            self.out.append("\n\n" if tag != "li" else "\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data.replace("\n", " "))  # a heading stays on its one line


def html_to_markdown(html: str) -> str:
    """The text of an HTML document with its headings as markdown headings."""
    parser = _HtmlText()
    parser.feed(html or "")
    parser.close()
    return re.sub(r"\n{3,}", "\n\n", "".join(parser.out))
