"""What a question's request asked for, kept with the question (seeds, clause 20).

A user message's `content_parts_json` holds its stored attachment references
(`{"type": "attachment", "id"}`) and one `request` part: the time zone and offset the
client gave, the tools the chat had on and the flags the request set, the client that sent
it (the page, or a program and its API key's name, and through what: WebSocket, HTTP
stream, form, queue) and the mode (a single answer, a compare, a temporary chat). Rows
written before hold attachments only, or NULL: they read as "no metadata". Everything that
reads attachments picks parts by their type, so the `request` part is passed over there.
"""

from __future__ import annotations

from typing import Any

REQUEST_PART = "request"

# The request's switches kept with it (when it set them): the send's own and the seed's
# tool fields of POST /api/chat_stream.
FLAG_FIELDS = ("queue", "allow_web_search", "allow_bash", "use_rag", "workspace")


def request_flags(payload: dict[str, Any]) -> dict[str, bool]:
    """The switches a request set (of FLAG_FIELDS, those it names), as booleans whatever
    form they came in."""
    return {
        name: payload[name] not in (None, False, "", "false", "0")
        for name in FLAG_FIELDS
        if name in payload
    }


def request_metadata(
    flags: dict[str, bool],
    *,
    timezone: str | None,
    tz_offset: int | None,
    tools: list[str],
    client: dict[str, Any] | None,
    mode: str,
) -> dict[str, Any]:
    """The `request` part of a question about to be saved (values already checked by the
    caller; `flags` from `request_flags`)."""
    return {
        "type": REQUEST_PART,
        "timezone": timezone,
        "tz_offset": tz_offset,
        "tools": [tool for tool in tools if isinstance(tool, str)],
        "flags": dict(flags),
        "client": client,
        "mode": mode,
    }


def question_parts(attachments: list[int], metadata: dict[str, Any] | None) -> list | None:
    """The content parts a question is saved with: its attachments, then its request."""
    parts: list[dict[str, Any]] = [{"type": "attachment", "id": a} for a in attachments]
    if metadata:
        parts.append(metadata)
    return parts or None


def stored_request(content_parts: Any) -> dict[str, Any] | None:
    """A message's `request` part (None for answers and for rows saved before it existed)."""
    for part in content_parts or ():
        if isinstance(part, dict) and part.get("type") == REQUEST_PART:
            return part
    return None


CLIENT_LABELS = {"page": "the page", "api": "the API"}


def describe_request(content_parts: Any) -> str | None:
    """One line for readable exports: where a question came from and what it asked for."""
    meta = stored_request(content_parts)
    if meta is None:
        return None
    said: list[str] = []
    client = meta.get("client") if isinstance(meta.get("client"), dict) else {}
    if client.get("kind") in CLIENT_LABELS:
        source = f"Sent from {CLIENT_LABELS[client['kind']]}"
        if isinstance(client.get("api_key"), str):
            source += f" (API key “{client['api_key']}”)"
        said.append(source)
    elif client.get("kind") == "task":
        late = client.get("late_seconds")
        late = late if isinstance(late, int) and not isinstance(late, bool) else 0
        said.append("Sent by a scheduled task" + (f", {late // 60} min late" if late else ""))
    elif client.get("via") == "queue":
        said.append("Sent from the queue")
    zone, offset = meta.get("timezone"), meta.get("tz_offset")
    if isinstance(offset, int) and not isinstance(offset, bool):
        sign = "+" if offset >= 0 else "-"
        utc = f"UTC{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
        said.append(f"{zone} ({utc})" if isinstance(zone, str) and zone else utc)
    elif isinstance(zone, str) and zone:
        said.append(zone)
    tools = [t for t in meta.get("tools") or () if isinstance(t, str)]
    if tools:
        said.append("tools: " + ", ".join(tools))
    if meta.get("mode") in ("compare", "temporary"):
        said.append(f"{meta['mode']} mode")
    return " · ".join(said) or None
