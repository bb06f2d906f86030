"""Importing chats from export files into new chats owned by the importing user.

An importer turns one recognised file format into neutral `ImportedChat`s: `detect_format`
finds the importer, whose `parse` validates and converts the whole file. A malformed file
raises `NumiError("invalid_import")` naming the bad field. This runs in the import's
subprocess (numi/chat/import_stream.py); numi/chat/import_writer.py stores the result in
the background, all of it or nothing.

Formats: Numi's own JSON export (`numi.chat`, version 1, lossless, every version); the
ChatGPT data export (conversations.json: every branch of each conversation's `mapping`
tree, the current one shown); Open WebUI's chat export (the `history` tree likewise, or its
flat `messages` list); and the apps of `numi.chat.importers` (Claude.ai, LibreChat,
LobeHub, Chatbox, Cherry Studio, Jan, LM Studio, big-AGI), all listed in `IMPORTERS`.

Versions travel as three optional keys on a neutral message: `key` (its id in the file),
`parent` (the key of its parent, None for a first message) and `selected`. A message
without `parent` follows the one before it, so a flat list stays a plain transcript. Foreign
formats keep what Numi can show: text, reasoning, tool use as readable text, and a
reference line for each image or file (their bytes are not in those exports).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


from ..errors import NumiError
from .chats import SETTING_KEYS, validate_settings
from .export import ATTACHMENT_INFO_KEY, FORMAT_TAG, FORMAT_VERSION
from .import_formats import ChatGPTImporter, OpenWebUIImporter
from .imported import ChatImporter, ImportedChat, invalid_import
from .importers.big_agi import BigAGIImporter
from .importers.chatbox import ChatboxImporter
from .importers.cherry_studio import CherryStudioImporter
from .importers.claude import ClaudeImporter
from .importers.jan import JanImporter
from .importers.librechat import LibreChatImporter
from .importers.lm_studio import LMStudioImporter
from .importers.lobehub import LobeHubImporter

ROLES = ("system", "user", "assistant", "tool")
# Settings that only make sense on the machine and account they were made on, and the ones
# that let a chat act (tools, auto-approval, the approval policy): a file from elsewhere
# never switches those on, nor decides which tool calls run without asking; the user does,
# after reading what they imported.
# fallbacks name endpoints of the install that exported the chat: meaningless here.
DROPPED_SETTINGS = ("workspace", "tools", "auto_approve", "tool_policy", "fallbacks")
KNOWN_SETTINGS = (*SETTING_KEYS, "fallbacks", "auto_compact", "auto_approve")


def check_sizes(imported: list[ImportedChat], limit: int) -> None:
    """An imported message may be no longer than a sent one: a 2 MB message froze every
    user on each view of its chat (issue 28, item 5), whatever format carried it."""
    for chat in imported:
        for index, message in enumerate(chat.messages):
            for name in ("content", "reasoning_content"):
                value = message.get(name)
                if isinstance(value, str) and len(value) > limit:
                    raise invalid_import(
                        f"messages[{index}].{name} is too long (at most {limit} characters, "
                        "the limit of a sent message)."
                    )


def detect_format(document: Any) -> ChatImporter:
    for importer in IMPORTERS:
        if importer.detect(document):
            return importer
    if isinstance(document, dict) and document.get("format") == FORMAT_TAG:
        raise invalid_import(
            f"This Numi export has version {document.get('version')!r}; this Numi reads version {FORMAT_VERSION}."
        )
    raise invalid_import(
        "Unrecognised file: its content is none of the exports Numi reads: "
        + "; ".join(importer.label for importer in IMPORTERS)
        + "."
    )


# --- Numi's own format ---------------------------------------------------------------------


class NumiImporter:
    """The `numi.chat` JSON document written by `numi.chat.export` (lossless)."""

    name = "numi"
    label = f"Numi (a chat export, format {FORMAT_TAG!r})"

    def detect(self, document: Any) -> bool:
        return (
            isinstance(document, dict)
            and document.get("format") == FORMAT_TAG
            and document.get("version") == FORMAT_VERSION
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        chat = _field(document, "chat", dict, "")
        messages = _field(document, "messages", list, "")
        title = _optional(chat, "title", str, "chat.") or "Imported chat"
        imported = ImportedChat(
            title=title.strip()[: limits["NUMI_MAX_TITLE_CHARS"]] or "Imported chat",
            model=_text_limit(_optional(chat, "model", str, "chat."), 200, "chat.model"),
            endpoint=_endpoint_hint(chat.get("endpoint")),
            settings=_settings(_optional(chat, "settings", dict, "chat.") or {}, limits),
            created_at=_time(chat.get("created_at"), "chat.created_at"),
        )
        seen_calls: set[str] = set()
        seen_requests: set[str] = set()
        keys: set[int] = set()
        for index, raw in enumerate(messages):
            where = f"messages[{index}]"
            message = _message(raw, where, seen_calls, seen_requests)
            message.update(_version_fields(raw, where, keys))
            imported.messages.append(message)
        return [imported]


def _message(raw: Any, where: str, seen_calls: set[str], seen_requests: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise invalid_import(f"{where} must be an object.")
    prefix = where + "."
    role = _field(raw, "role", str, prefix)
    if role not in ROLES:
        raise invalid_import(f"{where}.role must be one of: {', '.join(ROLES)}.")
    out: dict[str, Any] = {
        "role": role,
        "content": _optional(raw, "content", str, prefix),
        "content_parts": [
            _part(p, f"{where}.content_parts[{i}]")
            for i, p in enumerate(_optional(raw, "content_parts", list, prefix) or [])
        ],
        "reasoning_content": _optional(raw, "reasoning_content", str, prefix),
        "reasoning_details": _optional(raw, "reasoning_details", list, prefix) or [],
        "tool_calls": _optional(raw, "tool_calls", list, prefix) or [],
        "tool_call_id": _text_limit(
            _optional(raw, "tool_call_id", str, prefix), 200, f"{where}.tool_call_id"
        ),
        "citation_sources": _sources(_optional(raw, "citation_sources", list, prefix) or [], where),
        "meta": _meta(_optional(raw, "meta", dict, prefix) or {}, where),
        "request_id": _text_limit(
            _optional(raw, "request_id", str, prefix), 100, f"{where}.request_id"
        ),
        "created_at": _time(raw.get("created_at"), f"{where}.created_at"),
    }
    if out["tool_calls"] and role != "assistant":
        raise invalid_import(f"{where}: only assistant messages have tool_calls.")
    for i, call in enumerate(out["tool_calls"]):
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            raise invalid_import(f"{where}.tool_calls[{i}] needs a text id.")
        if len(call["id"]) > 200:
            raise invalid_import(f"{where}.tool_calls[{i}].id is too long.")
        function = call.get("function")
        if (
            not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise invalid_import(
                f"{where}.tool_calls[{i}].function needs a text name and text arguments."
            )
        seen_calls.add(call["id"])
    for i, detail in enumerate(out["reasoning_details"]):
        if not isinstance(detail, dict):
            raise invalid_import(f"{where}.reasoning_details[{i}] must be an object.")
    if role == "tool":
        if not out["tool_call_id"]:
            raise invalid_import(f"{where}: a tool result needs its tool_call_id.")
        if out["tool_call_id"] not in seen_calls:
            raise invalid_import(
                f"{where}: tool result for call {out['tool_call_id']!r} has no earlier tool call."
            )
    if out["request_id"] is not None:
        # (chat_id, request_id) is unique: a repeated id in a hand-made file is dropped, not fatal.
        if out["request_id"] in seen_requests:
            out["request_id"] = None
        else:
            seen_requests.add(out["request_id"])
    return out


def _version_fields(raw: dict[str, Any], where: str, keys: set[int]) -> dict[str, Any]:
    """`key`, `parent`, `selected` of a message of a Numi file (files from before versions
    have none: the message then follows the one before it)."""
    fields: dict[str, Any] = {}
    key = raw.get("id")
    if isinstance(key, int) and not isinstance(key, bool):
        if key in keys:
            raise invalid_import(f"{where}.id {key} is used twice.")
        keys.add(key)
        fields["key"] = key
    if "parent_id" in raw:
        parent = raw["parent_id"]
        if parent is not None and (isinstance(parent, bool) or parent not in keys or parent == key):
            raise invalid_import(
                f"{where}.parent_id must be the id of an earlier message, or null."
            )
        fields["parent"] = parent
    if "selected" in raw:
        if not isinstance(raw["selected"], bool):
            raise invalid_import(f"{where}.selected must be true or false.")
        fields["selected"] = raw["selected"]
    return fields


def _part(part: Any, where: str) -> dict[str, Any]:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise invalid_import(f"{where} must be an object with a text type.")
    if part["type"] == "attachment":
        if not isinstance(part.get("id"), int) or isinstance(part.get("id"), bool):
            raise invalid_import(f"{where}.id must be a number.")
        info = part.get(ATTACHMENT_INFO_KEY)
        if info is not None and not isinstance(info, dict):
            raise invalid_import(f"{where}.{ATTACHMENT_INFO_KEY} must be an object.")
    elif part["type"] == "text" and not isinstance(part.get("text"), str):
        raise invalid_import(f"{where}.text must be text.")
    return part


def _sources(sources: list[Any], where: str) -> list[dict[str, Any]]:
    for i, source in enumerate(sources):
        if not isinstance(source, dict) or any(
            not isinstance(source.get(key), str)
            for key in ("url", "title")
            if source.get(key) is not None
        ):
            raise invalid_import(
                f"{where}.citation_sources[{i}] must be an object with text url and title."
            )
    return sources


# Message meta the app reads, with the type each value must have. Meta is bookkeeping
# (model, timings, a tool's outcome): a known key of the wrong type is refused, since the
# pages and the agent read it; an unknown key is dropped.
_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "endpoint_id": int,
    "step": int,
    "turn_id": str,
    "finish_reason": str,
    "tool": str,
    "ok": bool,
    "error_code": str,
    "partial": bool,
    "edited_at": str,
    "imported_from": str,
    "tool_output": str,
    "tool_call": str,
    "error": (dict, str),
    "metrics": dict,
    "usage": dict,
    "interrupted": bool,
}


def _meta(raw: dict[str, Any], where: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _META_TYPES.get(key)
        if kind is None or value is None:
            continue
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise invalid_import(f"{where}.meta.{key} has the wrong type.")
        meta[key] = value
    if isinstance(meta.get("error"), dict):
        error = meta["error"]
        meta["error"] = {
            k: str(error[k])[:1000] for k in ("code", "message") if isinstance(error.get(k), str)
        }
    for key in ("metrics", "usage"):
        if key in meta:
            # Figures only: a text "tokens_per_s" would break every page that shows the chat.
            meta[key] = {
                k: v
                for k, v in meta[key].items()
                if isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
            }
    return meta


def _settings(raw: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    known = {k: v for k, v in raw.items() if k in KNOWN_SETTINGS and k not in DROPPED_SETTINGS}
    try:
        return validate_settings(known, limits)
    except NumiError as exc:
        raise invalid_import(f"chat.settings: {exc.message}") from None


def _endpoint_hint(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_import("chat.endpoint must be an object or null.")
    return {
        "id": value.get("id") if isinstance(value.get("id"), int) else None,
        "name": value.get("name") if isinstance(value.get("name"), str) else None,
    }


def _field(container: Any, name: str, kind: type, prefix: str) -> Any:
    if not isinstance(container, dict):
        raise invalid_import(f"{prefix.rstrip('.') or 'The file'} must be an object.")
    if name not in container:
        raise invalid_import(f"{prefix}{name} is missing.")
    value = container[name]
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise invalid_import(f"{prefix}{name} must be {_KIND_NAMES[kind]}.")
    return value


def _optional(container: dict[str, Any], name: str, kind: type, prefix: str) -> Any:
    if container.get(name) is None:
        return None
    return _field(container, name, kind, prefix)


_KIND_NAMES = {
    str: "text",
    list: "a list",
    dict: "an object",
    int: "a number",
    bool: "true or false",
}


def _text_limit(value: str | None, limit: int, where: str) -> str | None:
    if value is not None and len(value) > limit:
        raise invalid_import(f"{where} is too long (at most {limit} characters).")
    return value


def _time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_import(f"{where} must be an ISO date and time.")
    try:
        stamp = datetime.fromisoformat(value.removesuffix("Z"))
    except ValueError:
        raise invalid_import(f"{where} must be an ISO date and time.") from None
    # Stored naive UTC, like every other time in the database.
    return stamp if stamp.tzinfo is None else stamp.astimezone(UTC).replace(tzinfo=None)


# The one table of formats, tried in this order: each `detect` looks at the content only
# (never the file's name), for keys no earlier format has.
IMPORTERS: list[ChatImporter] = [
    NumiImporter(),
    ChatGPTImporter(),
    OpenWebUIImporter(),
    ClaudeImporter(),
    LibreChatImporter(),
    LobeHubImporter(),
    ChatboxImporter(),
    CherryStudioImporter(),
    JanImporter(),
    LMStudioImporter(),
    BigAGIImporter(),
]
