"""Content parts: the internal shapes and what adapters need from them.

Internal message content is a string or a list of parts:

    {"type": "text", "text": ...}
    {"type": "image", "mime": "image/png", "data": <bytes or base64 str>}
    {"type": "document", "name": ..., "text": ...}     sent to the model as text

Image bytes become base64 only here, at request time; data URLs are never stored.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any


def iter_parts(content: Any) -> Iterator[dict[str, Any]]:
    """Content as a list of parts (a plain string is one text part; None is none)."""
    if content is None:
        return
    if isinstance(content, str):
        if content:
            yield {"type": "text", "text": content}
        return
    for part in content:
        if isinstance(part, str):
            yield {"type": "text", "text": part}
        elif part.get("type") == "document":
            yield {"type": "text", "text": document_text(part)}
        else:
            yield part


def document_text(part: dict[str, Any]) -> str:
    name = part.get("name") or "document"
    return f"<document name={name!r}>\n{part.get('text', '')}\n</document>"


def plain_text(content: Any) -> str:
    """All text of a content value joined, images left out (for tool results, system)."""
    return "\n\n".join(
        part.get("text", "") for part in iter_parts(content) if part.get("type") == "text"
    )


def has_images(content: Any) -> bool:
    return any(part.get("type") == "image" for part in iter_parts(content))


def image_base64(part: dict[str, Any]) -> str:
    data = part.get("data", b"")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(data)).decode("ascii")
    return data


def image_data_url(part: dict[str, Any]) -> str:
    if part.get("url"):  # an https URL given by the user, passed through
        return part["url"]
    return f"data:{part.get('mime') or 'image/png'};base64,{image_base64(part)}"


def tool_result_text(content: Any) -> str:
    """A tool result's content as the text every protocol sends back: strings as they
    are, content parts flattened, anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return plain_text(content)
    return json.dumps(content)
