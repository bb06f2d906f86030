"""LibreChat's conversation export (the Export button of a chat, JSON).

Shape (LibreChat's own export code and its test data, danny-avila/LibreChat
api/server/utils/import/__data__/librechat-tree.json and librechat-export.json):
{conversationId, title, endpoint, options: {model, promptPrefix, ...}, recursive, messages}.
A message is {messageId, parentMessageId, isCreatedByUser, sender, text, content: [parts],
model, createdAt, files: [{filename}]}; with `recursive` each message holds its replies in
`children`, otherwise the list is flat and `parentMessageId` links it. The root's parent is
the all-zero id. Parts are `text` {text | {value}}, `think` {think}, `tool_call`
{tool_call: {name, args, output}}, `image_file` and `error`. The export has no pointer to
the branch on screen: the newest leaf is shown.
"""

from __future__ import annotations

from typing import Any

from .shapes import (
    ImportedChat,
    chat_of,
    joined,
    listed,
    message,
    obj,
    order_key,
    reference,
    text,
    time_of,
    tool_call,
    tool_output,
    tree,
)


class LibreChatImporter:
    name = "librechat"
    label = "LibreChat (chat export)"

    def detect(self, document: Any) -> bool:
        return (
            isinstance(document, dict)
            and isinstance(document.get("conversationId"), str)
            and isinstance(document.get("messages"), list)
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        options = document.get("options") if isinstance(document.get("options"), dict) else {}
        flat = self._flatten(
            listed(document.get("messages"), "messages"), document.get("recursive") is True
        )
        chat = chat_of(
            document.get("title") or options.get("title"),
            "conversation",
            limits,
            model=options.get("model"),
            system_prompt=options.get("promptPrefix") or document.get("promptPrefix"),
            source_id=document.get("conversationId"),
        )
        converted: dict[str, dict[str, Any] | None] = {}
        nodes: dict[str, dict[str, Any]] = {}
        for index, (raw, parent, where) in enumerate(flat):
            key = text(raw.get("messageId")) or f"#{index}"
            converted[key] = self._message(raw, where, options)
            stamp = converted[key]["created_at"] if converted[key] else None
            nodes[key] = {"parent": parent, "order": order_key(stamp, index)}
        stamps = [m["created_at"] for m in converted.values() if m and m["created_at"]]
        chat.created_at = min(stamps) if stamps else None
        tree(chat, nodes, lambda key: converted[key], "messages")
        return [chat]

    def _flatten(self, messages: list[Any], recursive: bool) -> list[tuple[dict, str | None, str]]:
        """(message, parent id, where) in file order, parents before children."""
        out: list[tuple[dict, str | None, str]] = []
        stack: list[tuple[Any, str | None, str]] = [
            (m, None, f"messages[{i}]") for i, m in reversed(list(enumerate(messages)))
        ]
        while stack:
            raw, parent, where = stack.pop()
            raw = obj(raw, where)
            if not recursive:
                parent = text(raw.get("parentMessageId")) or None
            out.append((raw, parent, where))
            children = listed(raw.get("children"), f"{where}.children") if recursive else []
            stack += [
                (child, text(raw.get("messageId")) or None, f"{where}.children[{i}]")
                for i, child in reversed(list(enumerate(children)))
            ]
        return out

    def _message(
        self, raw: dict[str, Any], where: str, options: dict[str, Any]
    ) -> dict[str, Any] | None:
        parts: list[str] = []
        thinking: list[str] = []
        for i, part in enumerate(listed(raw.get("content"), f"{where}.content")):
            part = obj(part, f"{where}.content[{i}]")
            kind = part.get("type")
            if kind == "text":
                value = part.get("text")
                parts.append(text(value.get("value")) if isinstance(value, dict) else text(value))
            elif kind == "think":
                value = part.get("think")
                thinking.append(
                    text(value.get("value")) if isinstance(value, dict) else text(value)
                )
            elif kind == "tool_call" and isinstance(part.get("tool_call"), dict):
                call = part["tool_call"]
                parts.append(tool_call(text(call.get("name")), call.get("args") or ""))
                if call.get("output"):
                    parts.append(tool_output(text(call.get("name")), call["output"]))
            elif kind == "image_file" and isinstance(part.get("image_file"), dict):
                parts.append(reference("image", text(part["image_file"].get("filename"))))
            elif kind == "error":
                parts.append(f"[error: {text(part.get('error') or part.get('text'))[:500]}]")
        if not parts:
            parts.append(text(raw.get("text")))
        for i, item in enumerate(listed(raw.get("files"), f"{where}.files")):
            item = obj(item, f"{where}.files[{i}]")
            kind = "image" if text(item.get("type")).startswith("image/") else "file"
            parts.append(reference(kind, text(item.get("filename")) or text(item.get("file_id"))))
        user = raw.get("isCreatedByUser") is True
        return message(
            "librechat",
            "user" if user else "assistant",
            joined(parts),
            reasoning=joined(thinking),
            created_at=time_of(raw.get("createdAt"), f"{where}.createdAt"),
            model=None if user else text(raw.get("model")) or text(options.get("model")),
        )
