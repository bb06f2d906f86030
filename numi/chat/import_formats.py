"""Importers for the formats users migrate from: ChatGPT's data export and Open WebUI's.

Both formats store a conversation as a tree (every edit or regenerate is a branch); the
import keeps every branch as Numi versions, with the branch the user last looked at
(`current_node` / `currentId`) shown.
What Numi cannot hold the same way becomes readable text: images and files become
reference lines (the exports carry no bytes Numi could store, and data URLs are never put
into message content), tool calls and tool output become labelled blocks on assistant
messages (the exports do not pair calls with results the way the model APIs need), and
hidden system scaffolding is dropped. Every check runs before anything is stored.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from .imported import ImportedChat, invalid_import

MAX_BRANCH = 100_000  # a parent chain longer than this is a cycle or a broken file


def _message(
    role: str,
    content: str,
    *,
    reasoning: str | None = None,
    created_at: datetime | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message in the neutral shape `importer._store` writes."""
    return {
        "role": role,
        "content": content,
        "content_parts": [],
        "reasoning_content": reasoning or None,
        "reasoning_details": [],
        "tool_calls": [],
        "tool_call_id": None,
        "citation_sources": [],
        "meta": meta or {},
        "request_id": None,
        "created_at": created_at,
    }


def _epoch(value: Any, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_import(f"{where} must be a number of seconds.")
    if value > 10**11:  # milliseconds (some Open WebUI versions)
        value = value / 1000
    try:
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        raise invalid_import(f"{where} is not a valid time.") from None


def _title(value: Any, where: str, limits: dict[str, Any]) -> str:
    if value is not None and not isinstance(value, str):
        raise invalid_import(f"{where} must be text.")
    return (value or "").strip()[: limits["NUMI_MAX_TITLE_CHARS"]] or "Imported chat"


def _conversations(document: Any, kind: str) -> list[Any]:
    items = document if isinstance(document, list) else [document]
    if not items:
        raise invalid_import("The file holds no chat.")
    return items


def _branch(nodes: dict[str, Any], current: str, parent_key: str, where: str) -> list[str]:
    """Node ids from the root down to `current`, following `parent_key` links."""
    chain: list[str] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in nodes:
            raise invalid_import(f"{where}: node {str(node_id)[:80]!r} is referenced but missing.")
        if node_id in seen or len(chain) > MAX_BRANCH:
            raise invalid_import(f"{where}: the message tree has a cycle.")
        seen.add(node_id)
        chain.append(node_id)
        node = nodes[node_id]
        if not isinstance(node, dict):
            raise invalid_import(f"{where}.{node_id} must be an object.")
        node_id = node.get(parent_key)
    chain.reverse()
    return chain


def _tree(nodes: dict[str, Any], parent_key: str, time_of) -> list[tuple[str, str | None]]:
    """Every node reachable from a root, parents first (depth first, siblings oldest first),
    as (node id, parent node id). A node whose parent is missing counts as a root; nodes
    in a cycle are unreachable and left out (the current path was checked by `_branch`)."""
    below: dict[str | None, list[str]] = {}
    for node_id, node in nodes.items():
        if not isinstance(node, dict):
            continue
        parent = node.get(parent_key)
        below.setdefault(
            parent if isinstance(parent, str) and parent in nodes else None, []
        ).append(node_id)
    order: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    stack: list[tuple[str, str | None]] = [
        (n, None) for n in reversed(_oldest_first(below.get(None, []), nodes, time_of))
    ]
    while stack:
        node_id, parent = stack.pop()
        if node_id in seen or len(order) > MAX_BRANCH:
            continue
        seen.add(node_id)
        order.append((node_id, parent))
        stack.extend(
            (c, node_id) for c in reversed(_oldest_first(below.get(node_id, []), nodes, time_of))
        )
    return order


def _oldest_first(ids: list[str], nodes: dict[str, Any], time_of) -> list[str]:
    return sorted(ids, key=lambda k: time_of(nodes[k]))  # stable: file order among equal times


def _versions(
    chat: ImportedChat, order: list[tuple[str, str | None]], current_path: list[str], convert
) -> None:
    """Append the converted messages of `order` to `chat` as versions: each keeps as parent
    its nearest converted ancestor; the nodes of the current path are the selected ones."""
    shown = set(current_path)
    stands_for: dict[
        str, str | None
    ] = {}  # node id -> key of its nearest converted ancestor-or-self
    for node_id, parent in order:
        parent_key = stands_for.get(parent) if parent is not None else None
        converted = convert(node_id)
        if converted is None:
            stands_for[node_id] = parent_key
            continue
        converted.update(key=node_id, parent=parent_key, selected=node_id in shown)
        chat.messages.append(converted)
        stands_for[node_id] = node_id


def _fenced(text: str, language: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


# --- ChatGPT ------------------------------------------------------------------------------


class ChatGPTImporter:
    """conversations.json from ChatGPT's "Export data": a list of conversations whose
    `mapping` holds nodes {id, message, parent, children} and `current_node` the leaf shown."""

    name = "chatgpt"
    label = "ChatGPT (conversations.json)"

    def detect(self, document: Any) -> bool:
        first = document[0] if isinstance(document, list) and document else document
        return isinstance(first, dict) and "mapping" in first

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        return [self.conversation(raw, i, limits) for i, raw in enumerate(self.items(document))]

    def items(self, document: Any) -> list[Any]:
        return _conversations(document, "ChatGPT")

    def conversation(self, raw: Any, index: int, limits: dict[str, Any]) -> ImportedChat:
        return self._conversation(raw, f"conversations[{index}]", limits)

    def _conversation(self, raw: Any, where: str, limits: dict[str, Any]) -> ImportedChat:
        if not isinstance(raw, dict):
            raise invalid_import(f"{where} must be an object.")
        mapping = raw.get("mapping")
        if not isinstance(mapping, dict) or not mapping:
            raise invalid_import(f"{where}.mapping must be an object of message nodes.")
        current = raw.get("current_node")
        if current is None:
            # No pointer: the newest leaf is what ChatGPT shows.
            leaves = [
                k for k, n in mapping.items() if isinstance(n, dict) and not n.get("children")
            ]
            current = max(leaves, key=lambda k: _node_time(mapping[k]), default=None)
        if current is None:
            raise invalid_import(f"{where}.current_node is missing.")
        model = raw.get("default_model_slug")
        chat = ImportedChat(
            title=_title(raw.get("title"), f"{where}.title", limits),
            model=model[:200] if isinstance(model, str) and model else None,
            created_at=_epoch(raw.get("create_time"), f"{where}.create_time"),
            source_id=_str(raw.get("conversation_id")) or _str(raw.get("id")) or None,
        )
        path = _branch(mapping, current, "parent", f"{where}.mapping")

        def convert(node_id: str) -> dict[str, Any] | None:
            message = mapping[node_id].get("message")
            if message is None:
                return None  # the synthetic root
            return self._message(message, f"{where}.mapping.{node_id}.message")

        _versions(chat, _tree(mapping, "parent", _node_time), path, convert)
        return chat

    def _message(self, raw: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            raise invalid_import(f"{where} must be an object.")
        author = raw.get("author")
        if not isinstance(author, dict) or not isinstance(author.get("role"), str):
            raise invalid_import(f"{where}.author.role is missing.")
        content = raw.get("content")
        if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
            raise invalid_import(f"{where}.content must be an object with a content_type.")
        metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        role, kind = author["role"], content["content_type"]
        created = _epoch(raw.get("create_time"), f"{where}.create_time")
        if metadata.get("is_visually_hidden_from_conversation") or kind in (
            "user_editable_context",
            "model_editable_context",
            "reasoning_recap",
        ):
            return None  # custom instructions, memory and UI scaffolding: never shown in ChatGPT
        text = self._text(content, where)
        lines = [text] if text else []
        lines += [
            f"[attachment: {a.get('name') or a.get('id')}]"
            for a in metadata.get("attachments") or []
            if isinstance(a, dict) and (a.get("name") or a.get("id"))
        ]
        body = "\n\n".join(lines)
        meta = {"imported_from": "chatgpt"}
        if isinstance(metadata.get("model_slug"), str):
            meta["model"] = metadata["model_slug"][:200]
        if kind == "thoughts":
            return (
                _message("assistant", "", reasoning=text, created_at=created, meta=meta)
                if text
                else None
            )
        if role == "tool":
            name = author.get("name") if isinstance(author.get("name"), str) else "tool"
            if not body:
                return None
            return _message(
                "assistant",
                f"**Tool output ({name})**\n\n{_fenced(body) if kind != 'multimodal_text' else body}",
                created_at=created,
                meta={**meta, "tool_output": name},
            )
        if role == "assistant" and raw.get("recipient") not in (None, "all"):
            # A call to a tool (code for the python tool, a browser query...).
            recipient = str(raw.get("recipient"))[:100]
            language = content.get("language") if isinstance(content.get("language"), str) else ""
            return (
                _message(
                    "assistant",
                    f"**Tool call ({recipient})**\n\n{_fenced(text, language if language != 'unknown' else '')}",
                    created_at=created,
                    meta={**meta, "tool_call": recipient},
                )
                if text
                else None
            )
        if role == "system":
            return _message("system", body, created_at=created, meta=meta) if body.strip() else None
        if role not in ("user", "assistant"):
            raise invalid_import(f"{where}.author.role {role[:40]!r} is not a ChatGPT role.")
        if not body.strip():
            return None
        return _message(role, body, created_at=created, meta=meta)

    def _text(self, content: dict[str, Any], where: str) -> str:
        kind = content["content_type"]
        if kind in ("text", "multimodal_text"):
            parts = content.get("parts")
            if not isinstance(parts, list):
                raise invalid_import(f"{where}.content.parts must be a list.")
            return "\n\n".join(
                filter(
                    None,
                    (self._part(p, f"{where}.content.parts[{i}]") for i, p in enumerate(parts)),
                )
            )
        if kind == "thoughts":
            thoughts = content.get("thoughts")
            if not isinstance(thoughts, list):
                raise invalid_import(f"{where}.content.thoughts must be a list.")
            return "\n\n".join(
                str(t.get("content") or t.get("summary") or "")
                for t in thoughts
                if isinstance(t, dict)
            )
        if kind == "tether_quote":
            return "\n".join(
                filter(
                    None,
                    (
                        _str(content.get("title")),
                        _str(content.get("url")),
                        _str(content.get("text")),
                    ),
                )
            )
        if kind == "tether_browsing_display":
            return _str(content.get("result")) or _str(content.get("summary"))
        # code, execution_output, system_error, and kinds this importer has not seen: their text.
        return _str(content.get("text")) or _str(content.get("result"))

    def _part(self, part: Any, where: str) -> str:
        if isinstance(part, str):
            return part
        if not isinstance(part, dict):
            raise invalid_import(f"{where} must be text or an object.")
        kind = part.get("content_type")
        if kind == "image_asset_pointer":
            size = (
                f" ({part['width']}×{part['height']})"
                if part.get("width") and part.get("height")
                else ""
            )
            pointer = _str(part.get("asset_pointer")) or "image"
            return f"[image: {pointer}{size}]"
        if kind == "audio_transcription":
            return _str(part.get("text"))
        if kind in ("audio_asset_pointer", "real_time_user_audio_video_asset_pointer"):
            return f"[audio: {_str(part.get('asset_pointer')) or 'recording'}]"
        if isinstance(part.get("text"), str):
            return part["text"]
        return f"[{_str(kind) or 'attachment'}]"


def _node_time(node: dict[str, Any]) -> float:
    message = node.get("message")
    value = message.get("create_time") if isinstance(message, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _webui_time(node: dict[str, Any]) -> float:
    value = node.get("timestamp")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- Open WebUI ---------------------------------------------------------------------------


class OpenWebUIImporter:
    """Open WebUI's "Export chats" JSON: a list of {id, title, chat: {title, models,
    history: {messages: {id: {parentId, role, content, ...}}, currentId}, messages: [...]}}."""

    name = "open-webui"
    label = "Open WebUI (chat export)"

    def detect(self, document: Any) -> bool:
        first = document[0] if isinstance(document, list) and document else document
        return isinstance(first, dict) and isinstance(first.get("chat"), dict)

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        return [self.conversation(raw, i, limits) for i, raw in enumerate(self.items(document))]

    def items(self, document: Any) -> list[Any]:
        return _conversations(document, "Open WebUI")

    def conversation(self, raw: Any, index: int, limits: dict[str, Any]) -> ImportedChat:
        return self._chat(raw, f"chats[{index}]", limits)

    def _chat(self, raw: Any, where: str, limits: dict[str, Any]) -> ImportedChat:
        if not isinstance(raw, dict) or not isinstance(raw.get("chat"), dict):
            raise invalid_import(f"{where}.chat must be an object.")
        body = raw["chat"]
        models = body.get("models")
        model = (
            models[0]
            if isinstance(models, list) and models and isinstance(models[0], str)
            else None
        )
        chat = ImportedChat(
            title=_title(body.get("title") or raw.get("title"), f"{where}.chat.title", limits),
            model=model[:200] if model else None,
            created_at=_epoch(
                raw.get("created_at") or body.get("timestamp"), f"{where}.created_at"
            ),
            source_id=_str(raw.get("id")) or None,
        )
        history = body.get("history")
        if isinstance(history, dict) and history.get("messages"):
            nodes = history["messages"]
            if not isinstance(nodes, dict):
                raise invalid_import(f"{where}.chat.history.messages must be an object.")
            current = history.get("currentId")
            if current is None:
                raise invalid_import(f"{where}.chat.history.currentId is missing.")
            base = f"{where}.chat.history.messages"
            path = _branch(nodes, current, "parentId", base)
            order = _tree(nodes, "parentId", _webui_time)
            _versions(
                chat,
                order,
                path,
                lambda node_id: self._message(nodes[node_id], f"{base}.{node_id}"),
            )
            return chat
        else:
            ordered = body.get("messages")
            if not isinstance(ordered, list):
                raise invalid_import(f"{where}.chat needs history.messages or a messages list.")
            base = f"{where}.chat.messages"
        for index, message in enumerate(ordered):
            converted = self._message(message, f"{base}[{index}]")
            if converted is not None:
                chat.messages.append(converted)
        return chat

    def _message(self, raw: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            raise invalid_import(f"{where} must be an object.")
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            raise invalid_import(f"{where}.role must be user, assistant or system.")
        lines = [self._content(raw.get("content"), where)]
        for i, item in enumerate(raw.get("files") or []):
            if not isinstance(item, dict):
                raise invalid_import(f"{where}.files[{i}] must be an object.")
            lines.append(self._file_line(item))
        text = "\n\n".join(line for line in lines if line)
        reasoning = None
        if isinstance(raw.get("reasoning"), str):
            reasoning = raw["reasoning"]
        meta: dict[str, Any] = {"imported_from": "open-webui"}
        if isinstance(raw.get("model"), str):
            meta["model"] = raw["model"][:200]
        if not text.strip() and not reasoning:
            return None
        return _message(
            role,
            text,
            reasoning=reasoning,
            meta=meta,
            created_at=_epoch(raw.get("timestamp"), f"{where}.timestamp"),
        )

    def _content(self, content: Any, where: str) -> str:
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if not isinstance(content, list):
            raise invalid_import(f"{where}.content must be text or a list of parts.")
        out = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise invalid_import(f"{where}.content[{i}] must be an object with a type.")
            if part["type"] == "text":
                out.append(_str(part.get("text")))
            elif part["type"] == "image_url":
                url = (
                    part.get("image_url", {}).get("url")
                    if isinstance(part.get("image_url"), dict)
                    else part.get("image_url")
                )
                out.append(_reference("image", _str(url)))
            else:
                out.append(f"[{part['type'][:40]}]")
        return "\n\n".join(filter(None, out))

    def _file_line(self, item: dict[str, Any]) -> str:
        kind = "image" if item.get("type") == "image" else "file"
        name = _str(item.get("name")) or _str(
            (item.get("file") or {}).get("filename") if isinstance(item.get("file"), dict) else ""
        )
        return _reference(kind, name or _str(item.get("url")))


def _reference(kind: str, source: str) -> str:
    """A reference line; inline data URLs are named, never copied into the transcript."""
    if source.startswith("data:"):
        source = f"inline {source[5:].split(';', 1)[0] or 'data'}"
    return f"[{kind}: {source[:300] or 'attachment'}]"


# The reference lines of files (`_reference`, and Claude.ai's attachment names), which a
# preview counts: the export names each file, and an import keeps the name, not the bytes.
_FILE_REFERENCE = re.compile(r"^\[(?:image|file|attachment): [^\n]*\]$", re.M)


def file_references(text: str) -> int:
    """How many files an imported message's text names in reference lines."""
    return len(_FILE_REFERENCE.findall(text)) if "[" in text else 0
