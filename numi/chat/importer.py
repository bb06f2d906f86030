"""Importing chats from export files into new chats owned by the importing user.

An importer turns one recognised file format into neutral `ImportedChat`s; `import_chats`
detects the format, lets its importer validate and convert the whole file first, then
writes every chat in one transaction. A malformed file raises `NumiError("invalid_import")`
naming the bad field, and nothing is written.

Formats: Numi's own JSON export (`numi.chat`, version 1, lossless, every version); the
ChatGPT data export (conversations.json: every branch of each conversation's `mapping`
tree, the current one shown); Open WebUI's chat export (the `history` tree likewise, or its
flat `messages` list).

Versions travel as three optional keys on a neutral message: `key` (its id in the file),
`parent` (the key of its parent, None for a first message) and `selected`. A message
without `parent` follows the one before it, so a flat list stays a plain transcript. Foreign
formats keep what Numi can show: text, reasoning, tool use as readable text, and a
reference line for each image or file (their bytes are not in those exports).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from .. import endpoints as endpoint_store
from ..errors import NumiError
from ..extensions import db
from ..models import Attachment, Chat, Endpoint, Message, utcnow
from . import versions
from .chats import SETTING_KEYS, validate_settings
from .export import ATTACHMENT_INFO_KEY, FORMAT_TAG, FORMAT_VERSION
from .import_formats import ChatGPTImporter, OpenWebUIImporter
from .imported import ChatImporter, ImportedChat, invalid_import

ROLES = ("system", "user", "assistant", "tool")
# Settings that only make sense on the machine and account they were made on, and the ones
# that let a chat act (tools, auto-approval, the approval policy): a file from elsewhere
# never switches those on, nor decides which tool calls run without asking; the user does,
# after reading what they imported.
# fallbacks name endpoints of the install that exported the chat: meaningless here.
DROPPED_SETTINGS = ("workspace", "tools", "auto_approve", "tool_policy", "fallbacks")
KNOWN_SETTINGS = (*SETTING_KEYS, "fallbacks", "auto_compact", "auto_approve")


def import_chats(user_id: int, document: Any, limits: dict[str, Any]) -> list[Chat]:
    """Create new chats for `user_id` from a decoded export file; all of them or none."""
    importer = detect_format(document)
    imported = importer.parse(document, limits)
    if not imported:
        raise invalid_import("The file holds no chat.")
    _check_sizes(imported, limits["NUMI_MAX_MESSAGE_CHARS"])
    try:
        chats = [_store(user_id, item) for item in imported]
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return chats


def _check_sizes(imported: list[ImportedChat], limit: int) -> None:
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
        f"Unrecognised file: expected a Numi chat export (format {FORMAT_TAG!r}), "
        "a ChatGPT conversations.json or an Open WebUI chat export."
    )


# --- Numi's own format ---------------------------------------------------------------------


class NumiImporter:
    """The `numi.chat` JSON document written by `numi.chat.export` (lossless)."""

    name = "numi"

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


# --- storing -------------------------------------------------------------------------------


def _store(user_id: int, item: ImportedChat) -> Chat:
    endpoint, model = _route(user_id, item)
    now = utcnow()
    chat = Chat(
        user_id=user_id,
        title=item.title,
        endpoint_id=endpoint.id if endpoint else None,
        model=model,
        created_at=item.created_at or now,
        updated_at=now,
    )
    chat.settings = item.settings
    db.session.add(chat)
    db.session.flush()
    owned = _owned_attachments(user_id, item.messages)
    stored: dict[Any, int] = {}  # file key -> new id
    previous = 0
    rows: list[Message] = []
    for fields in item.messages:
        # 0: a first message (None would let the column default choose a parent).
        parent = (
            (stored.get(fields["parent"], 0) if fields["parent"] is not None else 0)
            if "parent" in fields
            else previous
        )
        message = Message(
            chat_id=chat.id,
            parent_id=parent,
            selected=fields.get("selected", True),
            role=fields["role"],
            content=fields["content"],
            reasoning_content=fields["reasoning_content"],
            tool_call_id=fields["tool_call_id"],
            request_id=fields["request_id"],
            created_at=fields["created_at"] or now,
        )
        message.content_parts = [_attachment_part(p, owned) for p in fields["content_parts"]]
        message.reasoning_details = fields["reasoning_details"]
        message.tool_calls = fields["tool_calls"]
        message.citation_sources = fields["citation_sources"]
        message.meta = fields["meta"]
        db.session.add(message)
        # One flush per message: ids are assigned in transcript order on every backend.
        db.session.flush()
        if fields.get("key") is not None:
            stored[fields["key"]] = message.id
        previous = message.id
        rows.append(message)
    _one_selected(rows)
    # The chat was last active when its last message was written, not when it was imported:
    # the sidebar then files it under its own date.
    given = [f["created_at"] for f in item.messages if f["created_at"] is not None]
    chat.updated_at = max(given) if given else item.created_at or now
    db.session.flush()
    versions.refresh_active(chat.id)
    return chat


def _one_selected(rows: list[Message]) -> None:
    """Exactly one selected version per parent (the newest, when a file says none or several)."""
    groups: dict[int | None, list[Message]] = {}
    for row in rows:
        groups.setdefault(row.parent_id, []).append(row)
    for group in groups.values():
        chosen = [r for r in group if r.selected]
        keep = chosen[-1] if chosen else group[-1]
        for row in group:
            row.selected = row is keep


def _route(user_id: int, item: ImportedChat) -> tuple[Endpoint | None, str | None]:
    """The file's endpoint when this user can see it (same id and name, or same name);
    otherwise the user's default route, keeping the model if that endpoint offers it."""
    hint = item.endpoint or {}
    if hint.get("id") is not None:
        try:
            endpoint = endpoint_store.get_endpoint(user_id, hint["id"])
            if endpoint.name == hint.get("name"):
                return endpoint, item.model
        except NumiError:
            pass
    if hint.get("name"):
        endpoint = endpoint_store.find_by_name(user_id, hint["name"])
        if endpoint is not None:
            return endpoint, item.model
    default = endpoint_store.default_route(user_id)
    if default is None:
        return None, item.model
    if item.model and (item.model in default.model_ids or item.model == default.default_model):
        return default, item.model
    return default, default.default_model or item.model


def _owned_attachments(user_id: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    parts = [p for m in messages for p in m["content_parts"] if p["type"] == "attachment"]
    if not parts:
        return {"by_id": {}, "by_sha": {}}
    ids = {p["id"] for p in parts}
    shas = {
        p[ATTACHMENT_INFO_KEY].get("sha256")
        for p in parts
        if isinstance(p.get(ATTACHMENT_INFO_KEY), dict)
    }
    rows = db.session.execute(
        select(Attachment).where(
            Attachment.user_id == user_id,
            Attachment.id.in_(ids) | Attachment.sha256.in_({s for s in shas if isinstance(s, str)}),
        )
    ).scalars()
    found: dict[str, dict] = {"by_id": {}, "by_sha": {}}
    for row in rows:
        found["by_id"][row.id] = row
        found["by_sha"].setdefault(row.sha256, row)
    return found


def _attachment_part(part: dict[str, Any], owned: dict[str, Any]) -> dict[str, Any]:
    """An attachment reference the importing user owns; anything else becomes a text note,
    never a reference to another user's file."""
    if part["type"] != "attachment":
        return part
    info = part.get(ATTACHMENT_INFO_KEY) if isinstance(part.get(ATTACHMENT_INFO_KEY), dict) else {}
    clean = {k: v for k, v in part.items() if k != ATTACHMENT_INFO_KEY}
    row = owned["by_id"].get(part["id"])
    if row is not None and (not info.get("sha256") or info["sha256"] == row.sha256):
        return clean
    row = owned["by_sha"].get(info.get("sha256"))
    if row is not None:
        return {**clean, "id": row.id}
    name = info.get("filename") if isinstance(info.get("filename"), str) else f"#{part['id']}"
    return {"type": "text", "text": f"[attachment not available: {name}]"}


IMPORTERS: list[ChatImporter] = [NumiImporter(), ChatGPTImporter(), OpenWebUIImporter()]
