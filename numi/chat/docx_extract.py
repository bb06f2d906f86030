"""The text of a DOCX file, its headings kept as markdown headings.

A DOCX is a zip of XML parts; its text is `word/document.xml`. Each paragraph becomes a
line block; a paragraph whose style is a heading ("Heading 1".."Heading 6" or "Title" by
name in `word/styles.xml`, or an outline level) becomes a `#` line of its level, so the
chunker splits the document by headings and each chunk keeps its heading path
(numi/knowledge/chunking.py). Read with the standard library (zipfile, ElementTree): no
python-docx, no lxml.

A DOCX is untrusted input: a part is read at most MAX_PART_BYTES however large its header
says it is (a zip bomb stops there), the archive may hold at most MAX_ENTRIES files, and a
part with a DTD is refused (no entity expansion). Any of these, or a file that is no DOCX,
is `docx_unreadable` (415), and nothing is stored. Pure CPU work: run it in the CPU pool.
"""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree import ElementTree

from ..errors import NumiError

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MAX_PART_BYTES = 32 * 1024 * 1024  # of document.xml once inflated
MAX_ENTRIES = 10_000

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_NAME = re.compile(r"heading\s*([1-6])$", re.IGNORECASE)


def unreadable(why: str) -> NumiError:
    return NumiError("docx_unreadable", f"The DOCX could not be read: {why}.", 415)


def docx_text(data: bytes) -> str:
    """The paragraphs of a DOCX as markdown-ish text (headings as `#` lines)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise unreadable("it is not a DOCX file") from None
    if len(names) > MAX_ENTRIES:
        raise unreadable(f"it holds more than {MAX_ENTRIES:,} parts")
    if "word/document.xml" not in names:
        raise unreadable("it has no document text")
    levels = _heading_levels(
        _part(archive, "word/styles.xml") if "word/styles.xml" in names else b""
    )
    body = _parse(_part(archive, "word/document.xml"))
    blocks: list[str] = []
    for paragraph in body.iter(f"{_W}p"):
        words = _paragraph_text(paragraph).strip()
        if not words:
            continue
        level = _paragraph_level(paragraph, levels)
        blocks.append(f"{'#' * level} {' '.join(words.split())}" if level else words)
    return "\n\n".join(blocks)


def _part(archive: zipfile.ZipFile, name: str) -> bytes:
    """One part, inflated up to MAX_PART_BYTES whatever its header claims."""
    try:
        with archive.open(name) as handle:
            data = handle.read(MAX_PART_BYTES + 1)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        raise unreadable("the archive is damaged") from None
    if len(data) > MAX_PART_BYTES:
        raise unreadable(f"its text expands past {MAX_PART_BYTES // (1024 * 1024)} MB")
    return data


def _parse(data: bytes) -> ElementTree.Element:
    if b"<!DOCTYPE" in data[:4096].upper() or b"<!ENTITY" in data.upper():
        raise unreadable("it declares a DTD")
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError:
        raise unreadable("its XML is damaged") from None


def _heading_levels(styles: bytes) -> dict[str, int]:
    """Style id -> heading level, from the styles' names ("heading 2", "Title") and their
    outline levels."""
    levels: dict[str, int] = {}
    if not styles:
        return levels
    for style in _parse(styles).iter(f"{_W}style"):
        style_id = style.get(f"{_W}styleId") or ""
        name_element = style.find(f"{_W}name")
        name = (name_element.get(f"{_W}val") if name_element is not None else "") or ""
        found = _HEADING_NAME.match(name.strip())
        outline = style.find(f"{_W}pPr/{_W}outlineLvl")
        if found:
            levels[style_id] = int(found.group(1))
        elif name.strip().lower() == "title":
            levels[style_id] = 1
        elif outline is not None and (outline.get(f"{_W}val") or "").isdigit():
            level = int(outline.get(f"{_W}val") or 9) + 1
            if level <= 6:
                levels[style_id] = level
    return levels


def _paragraph_level(paragraph: ElementTree.Element, levels: dict[str, int]) -> int:
    """The paragraph's heading level (0: body text): its own outline level, else its style's
    (a style id like "Heading2" counts when styles.xml does not name it)."""
    outline = paragraph.find(f"{_W}pPr/{_W}outlineLvl")
    if outline is not None and (outline.get(f"{_W}val") or "").isdigit():
        level = int(outline.get(f"{_W}val") or 9) + 1
        return level if level <= 6 else 0
    style = paragraph.find(f"{_W}pPr/{_W}pStyle")
    style_id = (style.get(f"{_W}val") if style is not None else "") or ""
    if style_id in levels:
        return levels[style_id]
    found = re.fullmatch(r"heading\s*([1-6])", style_id, re.IGNORECASE)
    return int(found.group(1)) if found else (1 if style_id.lower() == "title" else 0)


def _paragraph_text(paragraph: ElementTree.Element) -> str:
    out: list[str] = []
    for element in paragraph.iter():
        if element.tag == f"{_W}t" and element.text:
            out.append(element.text)
        elif element.tag == f"{_W}tab":
            out.append("\t")
        elif element.tag in (f"{_W}br", f"{_W}cr"):
            out.append("\n")
    return "".join(out)
