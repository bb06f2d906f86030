"""Exporting a chat: Markdown, plain text, a versioned JSON document, a printable HTML file.

Every export starts from one owner-scoped load (`get_chat`) and one neutral view of the
transcript (`ExportMessage`): content flattened to text plus attachment reference lines,
reasoning, tool calls paired with their results, citation sources. The text formats are
written here; the HTML file comes from `templates/export.html` and renders message bodies
with `render_markdown`, the app's one renderer. The JSON document (`numi.chat`, version 1)
keeps every stored field and every version (each message names its `parent_id` and whether
it is the `selected` version), and is what `numi.chat.importer` reads back. The readable
formats show the transcript: the shown version of each message.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from flask import render_template
from markupsafe import Markup
from sqlalchemy import select

from ..errors import invalid
from ..extensions import db
from ..models import Attachment, Chat, Endpoint, Message, Project, utcnow
from .chats import get_chat
from .attachments import TOOL_IMAGE
from .request_meta import REQUEST_PART, describe_request
from .versions import load_tree

FORMAT_TAG = "numi.chat"
FORMAT_VERSION = 1
# Bare types: the response adds "; charset=utf-8" to text types itself (once).
FORMATS = {
    "md": "text/markdown",
    "txt": "text/plain",
    "json": "application/json",
    "html": "text/html",
}
ROLE_LABELS = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
# Keys the JSON export adds to an attachment part; the importer removes them again.
ATTACHMENT_INFO_KEY = "attachment"


@dataclass
class ExportFile:
    filename: str
    mimetype: str
    body: str


@dataclass
class ToolCallView:
    id: str
    name: str
    arguments: str
    result: str | None = None
    ok: bool = True


@dataclass
class SourceView:
    title: str
    url: str | None  # only http(s) URLs; anything else is shown as text, never linked


@dataclass
class ExportMessage:
    """One message as every export format shows it (no HTML in here)."""

    role: str
    label: str
    created_at: str
    text: str
    attachments: list[str] = field(default_factory=list)
    # The attachment each reference line names (None for an image URL or a missing file):
    # the Markdown mirror links its copy of the file there.
    attachment_ids: list[int | None] = field(default_factory=list)
    reasoning: str = ""
    tool_calls: list[ToolCallView] = field(default_factory=list)
    sources: list[SourceView] = field(default_factory=list)
    model: str | None = None
    error: str | None = None
    # An answer's "Answered by <model> on <endpoint>: …" after a fallback; a question's
    # request: where it was sent from, its time zone, tools and mode (chat.request_meta).
    notice: str | None = None


def export_chat(user_id: int, chat_id: str, fmt: str) -> ExportFile:
    """The user's chat `chat_id` in format `fmt` (md, txt, json or html); 404 for a foreign chat."""
    if fmt not in FORMATS:
        raise invalid(f"Unknown export format; use one of: {', '.join(FORMATS)}.", "invalid_format")
    chat = get_chat(user_id, chat_id)
    return render_export(user_id, chat, fmt)


def render_export(user_id: int, chat: Chat, fmt: str) -> ExportFile:
    """Export an already loaded (owner-checked) chat."""
    messages = load_transcript(chat, every_version=fmt == "json")
    attachments = attachment_index(user_id, messages)
    if fmt == "json":
        body = json.dumps(chat_document(chat, messages, attachments), ensure_ascii=False, indent=2)
    else:
        views = message_views(messages, attachments)
        if fmt == "md":
            body = _markdown(chat, views)
        elif fmt == "txt":
            body = _plain_text(chat, views)
        else:
            body = _html(chat, views)
    return ExportFile(export_filename(chat.title, fmt), FORMATS[fmt], body)


def load_transcript(chat: Chat, *, every_version: bool = False) -> list[Message]:
    """The chat's transcript (shown messages) in order; with `every_version`, every live
    message of every version, each with `export_parent_id`: its nearest live ancestor
    (a deleted message in between is skipped, so the file's tree has no holes)."""
    if not every_version:
        stmt = (
            select(Message).where(Message.chat_id == chat.id, Message.shown()).order_by(Message.id)
        )
        return list(db.session.execute(stmt).scalars())
    stmt = (
        select(Message)
        .where(Message.chat_id == chat.id, Message.deleted_at.is_(None))
        .order_by(Message.id)
    )
    messages = list(db.session.execute(stmt).scalars())
    tree = load_tree(chat.id)
    for message in messages:
        parent = tree.get(message.parent_id)
        while parent is not None and not parent.live:
            parent = tree.get(parent.parent_id)
        message.export_parent_id = parent.id if parent is not None else None
    return messages


def attachment_index(user_id: int, messages: list[Message]) -> dict[int, Attachment]:
    """The user's attachments referenced by the messages, by id (foreign ids are left out)."""
    ids = {
        part["id"]
        for m in messages
        for part in m.content_parts
        if isinstance(part, dict)
        and part.get("type") == "attachment"
        and isinstance(part.get("id"), int)
    }
    if not ids:
        return {}
    rows = db.session.execute(
        select(Attachment).where(Attachment.id.in_(ids), Attachment.user_id == user_id)
    ).scalars()
    return {a.id: a for a in rows}


# --- JSON ----------------------------------------------------------------------------------


def chat_document(
    chat: Chat, messages: list[Message], attachments: dict[int, Attachment]
) -> dict[str, Any]:
    """The versioned `numi.chat` document: every stored field, JSON columns decoded."""
    endpoint = db.session.get(Endpoint, chat.endpoint_id) if chat.endpoint_id else None
    return {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "exported_at": _iso(utcnow()),
        "chat": {
            "id": chat.id,
            "title": chat.title,
            "model": chat.model,
            "endpoint": {"id": endpoint.id, "name": endpoint.name, "kind": endpoint.kind}
            if endpoint
            else None,
            "settings": chat.settings,
            "project": _project(chat),
            "created_at": _iso(chat.created_at),
            "updated_at": _iso(chat.updated_at),
        },
        "messages": [_message_document(m, attachments) for m in messages],
    }


def _project(chat: Chat) -> dict[str, Any] | None:
    """The name and instructions of the chat's project (what its requests carried)."""
    project = db.session.get(Project, chat.project_id) if chat.project_id else None
    if project is None or project.user_id != chat.user_id:
        return None
    return {"name": project.name, "instructions": project.instructions or ""}


def _message_document(message: Message, attachments: dict[int, Attachment]) -> dict[str, Any]:
    parts = []
    for part in message.content_parts:
        if (
            isinstance(part, dict)
            and part.get("type") == "attachment"
            and part.get("id") in attachments
        ):
            found = attachments[part["id"]]
            # Lets an import into another account match the file by content, or say what is missing.
            part = {
                **part,
                ATTACHMENT_INFO_KEY: {
                    "filename": found.filename,
                    "mime": found.mime,
                    "size": found.size,
                    "sha256": found.sha256,
                },
            }
        parts.append(part)
    return {
        "id": message.id,
        "parent_id": getattr(message, "export_parent_id", message.parent_id or None),
        "selected": message.selected,
        "role": message.role,
        "content": message.content,
        "content_parts": parts,
        "reasoning_content": message.reasoning_content,
        "reasoning_details": message.reasoning_details,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
        "citation_sources": message.citation_sources,
        "meta": message.meta,
        "request_id": message.request_id,
        "created_at": _iso(message.created_at),
    }


# --- the readable view ---------------------------------------------------------------------


def message_views(
    messages: list[Message], attachments: dict[int, Attachment]
) -> list[ExportMessage]:
    """The transcript as readable messages; tool results sit under the call that asked for them."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    answered: set[str] = set()
    views: list[ExportMessage] = []
    for message in messages:
        if message.role == "tool" and message.tool_call_id in answered:
            continue
        text, references, ids = _content_and_files(message, attachments)
        view = ExportMessage(
            role=message.role,
            label=ROLE_LABELS.get(message.role, message.role),
            created_at=_stamp(message.created_at),
            text=text,
            attachments=references,
            attachment_ids=ids,
            reasoning=message.reasoning_content
            or _reasoning_from_details(message.reasoning_details),
            sources=[s for s in (_source(item) for item in message.citation_sources) if s],
            model=message.meta.get("model") if message.role == "assistant" else None,
            error=_error_text(message.meta.get("error")),
            notice=describe_request(message.content_parts)
            if message.role == "user"
            else _fallback_notice(message.meta.get("fallback")),
        )
        if message.role == "tool":
            view.label = f"Tool result ({message.meta.get('tool') or message.tool_call_id or 'unknown call'})"
        for call in message.tool_calls:
            if not isinstance(call, dict):
                continue
            call_view = _call_view(call)
            result = results.get(call_view.id)
            if result is not None:
                call_view.result = result.content or ""
                call_view.ok = bool(result.meta.get("ok", True))
                answered.add(call_view.id)
            view.tool_calls.append(call_view)
        views.append(view)
    return views


def flatten_content(message: Message, attachments: dict[int, Attachment]) -> tuple[str, list[str]]:
    """(the message's text, its attachment/image reference lines)."""
    text, lines, _ids = _content_and_files(message, attachments)
    return text, lines


def _content_and_files(
    message: Message, attachments: dict[int, Attachment]
) -> tuple[str, list[str], list[int | None]]:
    """`flatten_content`, and beside each reference line the attachment it names, if any."""
    texts = [message.content] if message.content else []
    lines: list[str] = []
    ids: list[int | None] = []
    for part in message.content_parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part["text"] not in texts:
            texts.append(part["text"])
        elif kind == "attachment":
            found = attachments.get(part.get("id"))  # type: ignore[arg-type]
            if found is not None:
                lines.append(f"[attachment: {found.filename} ({human_size(found.size)})]")
                ids.append(found.id)
            else:
                lines.append(f"[attachment #{part.get('id')} (not available)]")
                ids.append(None)
        elif kind in ("image_url", "image"):
            url = (
                part.get("image_url", {}).get("url")
                if isinstance(part.get("image_url"), dict)
                else part.get("url")
            )
            shown = url if isinstance(url, str) and not url.startswith("data:") else "inline image"
            lines.append(f"[image: {shown}]")
            ids.append(None)
        elif kind and kind not in (REQUEST_PART, TOOL_IMAGE):
            # (the request is the question's notice; a tool's image is on its card)
            lines.append(f"[{kind}]")
            ids.append(None)
    return "\n\n".join(texts), lines, ids


def human_size(size: int | None) -> str:
    if size is None:
        return "unknown size"
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def _call_view(call: dict[str, Any]) -> ToolCallView:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = function.get("name") or call.get("name") or "tool"
    arguments = function.get("arguments", call.get("arguments", ""))
    if isinstance(arguments, str):
        try:
            arguments = json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
        except ValueError:
            pass
    else:
        arguments = json.dumps(arguments, ensure_ascii=False, indent=2)
    return ToolCallView(id=str(call.get("id") or ""), name=str(name), arguments=arguments or "")


def _reasoning_from_details(details: list[Any]) -> str:
    texts = []
    for item in details:
        if isinstance(item, dict):
            text = item.get("text") or item.get("summary") or item.get("thinking")
            if isinstance(text, str):
                texts.append(text)
    return "\n\n".join(texts)


def _source(item: Any) -> SourceView | None:
    if isinstance(item, str):
        url, title = item, item
    elif isinstance(item, dict):
        url = item.get("url") or item.get("href") or ""
        title = item.get("title") or item.get("name") or url
    else:
        return None
    url = url if isinstance(url, str) else ""
    title = str(title) if title else url
    if not title:
        return None
    return SourceView(title=title, url=url if _is_web_url(url) else None)


def _is_web_url(url: str) -> bool:
    if not url or url != url.strip() or any(ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _error_text(error: Any) -> str | None:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or "error")
    return str(error) if error else None


# --- Markdown and plain text ---------------------------------------------------------------


def _fence(text: str, info: str = "") -> str:
    """A fenced block that the text cannot close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _markdown(chat: Chat, views: list[ExportMessage]) -> str:
    out = [f"# {chat.title}", ""]
    if chat.model:
        out.append(f"- Model: {chat.model}")
    out += [f"- Created: {_stamp(chat.created_at)}", f"- Exported: {_stamp(utcnow())}", ""]
    if chat.settings.get("system_prompt"):
        out += ["**System prompt**", "", _quote(chat.settings["system_prompt"]), ""]
    for view in views:
        out += message_markdown(view)
    return "\n".join(out).rstrip() + "\n"


def message_markdown(
    view: ExportMessage, *, mirrored: bool = False, links: Mapping[int, str] | None = None
) -> list[str]:
    """One message's Markdown lines: the Markdown download's, or (`mirrored`) the Markdown
    mirror's, whose files are read in an editor and rewritten only when a chat changes: the
    time in the heading, no rule between messages, the reasoning folded away. `links`
    replaces the reference line of an attachment (by id) with a link to its copy."""
    heading = view.label + (f" · {view.model}" if view.model else "")
    if mirrored:
        out = [f"## {heading} · {view.created_at}", ""]
    else:
        out = ["---", "", f"## {heading}", "", f"*{view.created_at}*", ""]
    if view.notice:
        out += [f"*{view.notice}*", ""]
    if view.reasoning and mirrored:
        out += [
            "<details><summary>Reasoning</summary>",
            "",
            _fence(view.reasoning),
            "",
            "</details>",
            "",
        ]
    elif view.reasoning:
        out += ["**Reasoning**", "", _quote(view.reasoning), ""]
    if view.text:
        out += [view.text if view.role != "tool" else _fence(view.text), ""]
    linked = links or {}
    for item, attachment_id in zip(
        view.attachments, view.attachment_ids or [None] * len(view.attachments), strict=True
    ):
        out += [linked.get(attachment_id, item) if attachment_id is not None else item, ""]
    for call in view.tool_calls:
        out += [f"**Tool call:** `{call.name}` ({call.id})", "", _fence(call.arguments, "json"), ""]
        if call.result is not None:
            out += ["**Result**" + ("" if call.ok else " (failed)"), "", _fence(call.result), ""]
    if view.sources:
        out += ["**Sources**", "", *_source_lines(view.sources), ""]
    if view.error:
        out += [f"> **Error:** {view.error}", ""]
    return out


def _fallback_notice(fallback: object) -> str | None:
    """The words of a fallback's notice in an answer's meta (agent.routes.FallbackNotice)."""
    notice = fallback.get("notice") if isinstance(fallback, dict) else None
    return notice if isinstance(notice, str) and notice else None


def _source_lines(sources: list[SourceView], indent: str = "") -> list[str]:
    """An answer's sources, numbered as it cites them: the title, and the URL after it
    unless the title is the URL."""
    return [
        f"{indent}{n}. {s.title}" + (f" <{s.url}>" if s.url and s.url != s.title else "")
        for n, s in enumerate(sources, 1)
    ]


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines())


def _plain_text(chat: Chat, views: list[ExportMessage]) -> str:
    out = [chat.title, "=" * max(3, len(chat.title)), ""]
    if chat.model:
        out.append(f"Model: {chat.model}")
    out += [f"Created: {_stamp(chat.created_at)}", ""]
    if chat.settings.get("system_prompt"):
        out += ["System prompt:", _indent(chat.settings["system_prompt"]), ""]
    for view in views:
        out += [f"[{view.label}{' · ' + view.model if view.model else ''}] {view.created_at}", ""]
        if view.notice:
            out += [view.notice, ""]
        if view.reasoning:
            out += ["Reasoning:", _indent(view.reasoning), ""]
        if view.text:
            out += [view.text, ""]
        out += [line for item in view.attachments for line in (item, "")]
        for call in view.tool_calls:
            out += [f"Tool call: {call.name} ({call.id})", _indent(call.arguments)]
            if call.result is not None:
                out += ["Result" + ("" if call.ok else " (failed)") + ":", _indent(call.result)]
            out.append("")
        if view.sources:
            out.append("Sources:")
            out += _source_lines(view.sources, indent="  ")
            out.append("")
        if view.error:
            out += [f"Error: {view.error}", ""]
    return "\n".join(out).rstrip() + "\n"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    "


# --- HTML ----------------------------------------------------------------------------------


def _html(chat: Chat, views: list[ExportMessage]) -> str:
    from ..render import highlight_css  # lazy: start-up time

    # The Pygments stylesheet is ours, not input: it goes into <style> unescaped.
    return render_template(
        "export.html",
        chat=chat,
        messages=views,
        created=_stamp(chat.created_at),
        exported=_stamp(utcnow()),
        highlight_css=Markup(highlight_css()),
    )


# --- names and times -----------------------------------------------------------------------


def export_filename(title: str, fmt: str) -> str:
    """A file name from the chat title: letters, digits, spaces, dots, dashes only."""
    name = unicodedata.normalize("NFKC", title or "")
    name = "".join(c if (c.isalnum() or c in " ._-") else " " for c in name)
    name = re.sub(r"\s+", " ", name).strip(" .-_")[:80].strip()
    return f"{name or 'chat'}.{fmt}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() + "Z" if value else None


def _stamp(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else ""
