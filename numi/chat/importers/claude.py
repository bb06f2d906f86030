"""Claude.ai's data export: `conversations.json` from the zip of Settings → Privacy → Export data.

Shape (read from real exports published in public repositories, and the types of the
exporters that read the same file, e.g. socketteer/Claude-Conversation-Exporter): a list of
conversations {uuid, name, summary, created_at, updated_at, account, chat_messages}; each
message {uuid, sender: "human" | "assistant", text, content: [blocks], created_at,
attachments: [{file_name, file_type, file_size, extracted_content}], files: [{file_name}],
parent_message_uuid (newer exports)}. Blocks are `text`, `thinking` {thinking}, `tool_use`
{name, input} (artifacts are the `artifacts` tool: {type, language, title, content}) and
`tool_result` {name, content}. With parents the messages form a tree (edits and retries);
`current_leaf_message_uuid`, when there, is the branch shown, else the newest leaf.
"""

from __future__ import annotations

from typing import Any

from .shapes import (
    ImportedChat,
    chat_of,
    fenced,
    invalid_import,
    joined,
    listed,
    message,
    obj,
    order_key,
    text,
    time_of,
    tool_call,
    tool_output,
    tree,
)

# An artifact's type, as the fence Numi previews (html, svg, mermaid) or highlights.
_ARTIFACT_FENCES = {
    "text/html": "html",
    "image/svg+xml": "svg",
    "application/vnd.ant.mermaid": "mermaid",
    "application/vnd.ant.react": "jsx",
    "text/markdown": "markdown",
}


class ClaudeImporter:
    name = "claude"
    label = "Claude.ai (conversations.json)"

    def detect(self, document: Any) -> bool:
        first = document[0] if isinstance(document, list) and document else document
        return isinstance(first, dict) and "chat_messages" in first

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        return [self.conversation(raw, i, limits) for i, raw in enumerate(self.items(document))]

    def items(self, document: Any) -> list[Any]:
        return document if isinstance(document, list) else [document]

    def conversation(self, raw: Any, index: int, limits: dict[str, Any]) -> ImportedChat:
        return self._conversation(raw, f"conversations[{index}]", limits)

    def _conversation(self, raw: Any, where: str, limits: dict[str, Any]) -> ImportedChat:
        raw = obj(raw, where)
        chat = chat_of(
            raw.get("name"),
            where,
            limits,
            created_at=time_of(raw.get("created_at"), f"{where}.created_at"),
            source_id=raw.get("uuid"),
        )
        messages = [
            obj(m, f"{where}.chat_messages[{i}]")
            for i, m in enumerate(listed(raw.get("chat_messages"), f"{where}.chat_messages"))
        ]
        converted = {
            str(i): self._message(m, f"{where}.chat_messages[{i}]") for i, m in enumerate(messages)
        }
        if not any(isinstance(m.get("parent_message_uuid"), str) for m in messages):
            chat.messages += [m for m in converted.values() if m is not None]
            return chat
        by_uuid = {text(m.get("uuid")) or str(i): str(i) for i, m in enumerate(messages)}
        nodes = {
            str(i): {
                "parent": by_uuid.get(text(m.get("parent_message_uuid"))),
                "order": order_key(converted[str(i)] and converted[str(i)]["created_at"], i),
            }
            for i, m in enumerate(messages)
        }
        current = by_uuid.get(text(raw.get("current_leaf_message_uuid")))
        tree(chat, nodes, lambda key: converted[key], f"{where}.chat_messages", current)
        return chat

    def _message(self, raw: dict[str, Any], where: str) -> dict[str, Any] | None:
        sender = raw.get("sender")
        if sender not in ("human", "assistant"):
            raise invalid_import(f"{where}.sender must be human or assistant.")
        parts: list[str] = []
        thinking: list[str] = []
        blocks = listed(raw.get("content"), f"{where}.content")
        for i, block in enumerate(blocks):
            block = obj(block, f"{where}.content[{i}]")
            kind = block.get("type")
            if kind == "text":
                parts.append(text(block.get("text")))
            elif kind == "thinking":
                thinking.append(text(block.get("thinking")))
            elif kind == "tool_use":
                parts.append(self._tool_use(block))
            elif kind == "tool_result" and block.get("name") != "artifacts":
                # (the artifacts tool answers "OK": the artifact itself is in its call)
                parts.append(
                    tool_output(text(block.get("name")), _result_text(block.get("content")))
                )
        if not blocks:
            parts.append(text(raw.get("text")))
        for key in ("attachments", "files", "files_v2"):
            for i, item in enumerate(listed(raw.get(key), f"{where}.{key}")):
                name = text(obj(item, f"{where}.{key}[{i}]").get("file_name"))
                if name and f"[attachment: {name}]" not in parts:
                    parts.append(f"[attachment: {name[:300]}]")
        return message(
            "claude",
            "user" if sender == "human" else "assistant",
            joined(parts),
            reasoning=joined(thinking),
            created_at=time_of(raw.get("created_at"), f"{where}.created_at"),
        )

    def _tool_use(self, block: dict[str, Any]) -> str:
        name = text(block.get("name"))
        given = block.get("input") if isinstance(block.get("input"), dict) else {}
        body = text(given.get("content"))
        if name == "artifacts" and body:
            kind = text(given.get("type"))
            language = _ARTIFACT_FENCES.get(kind) or text(given.get("language"))
            title = text(given.get("title")) or "Artifact"
            return f"**{title}**\n\n{fenced(body, language)}"
        return tool_call(name, given)


def _result_text(content: Any) -> Any:
    if isinstance(content, list):
        return joined(text(c.get("text")) for c in content if isinstance(c, dict))
    return content
