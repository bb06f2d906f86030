"""big-AGI's export: "Backup chats" (all) or a chat's "Download JSON" (one).

Shape (big-AGI's own export code, enricoros/big-AGI src/modules/trade/trade.client.ts:
`ExportedAllJsonV1b` = {conversations: [ExportedConversationJsonV1], models, folders}, and
`conversationToJsonV1` = {id, messages, systemPurposeId, userTitle, autoTitle, created,
updated}, times in milliseconds). A message is a `DMessage`: {id, role, created, updated,
originLLM} with `text` (v1), or with `fragments` (v2): [{ft: "content", part: {pt: "text",
text} | {pt: "error", error} | {pt: "tool_invocation", invocation} | {pt: "image_ref"}},
{ft: "attachment", title, part: {pt: "doc", meta: {srcFileName}}}, {ft: "void", part:
{pt: "ma", aType: "reasoning", aText}}] and `generator: {name}`. big-AGI chats are linear;
a leading system message is the persona's prompt.
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
    reference,
    text,
    time_of,
    tool_call,
)


class BigAGIImporter:
    name = "big-agi"
    label = "big-AGI (chats backup or one chat's JSON)"

    def detect(self, document: Any) -> bool:
        if isinstance(document, dict) and isinstance(document.get("conversations"), list):
            first = document["conversations"][0] if document["conversations"] else None
            return isinstance(first, dict) and "systemPurposeId" in first
        return (
            isinstance(document, dict) and "systemPurposeId" in document and "messages" in document
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        items = document["conversations"] if "conversations" in document else [document]
        return [
            self._conversation(obj(c, f"conversations[{i}]"), f"conversations[{i}]", limits)
            for i, c in enumerate(items)
        ]

    def _conversation(
        self, raw: dict[str, Any], where: str, limits: dict[str, Any]
    ) -> ImportedChat:
        messages = [
            obj(m, f"{where}.messages[{i}]")
            for i, m in enumerate(listed(raw.get("messages"), f"{where}.messages"))
        ]
        prompt = ""
        if messages and messages[0].get("role") == "system":
            prompt = self._content(messages[0], f"{where}.messages[0]")[0]
            messages = messages[1:]
        chat = chat_of(
            raw.get("userTitle") or raw.get("autoTitle"),
            where,
            limits,
            created_at=time_of(raw.get("created"), f"{where}.created"),
            system_prompt=prompt,
            source_id=raw.get("id"),
        )
        for i, raw_message in enumerate(messages):
            converted = self._message(raw_message, f"{where}.messages[{i + bool(prompt)}]")
            if converted is not None:
                chat.messages.append(converted)
        return chat

    def _message(self, raw: dict[str, Any], where: str) -> dict[str, Any] | None:
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            return None
        body, reasoning = self._content(raw, where)
        generator = raw.get("generator") if isinstance(raw.get("generator"), dict) else {}
        return message(
            "big-agi",
            role,
            body,
            reasoning=reasoning,
            created_at=time_of(raw.get("created"), f"{where}.created"),
            model=(text(raw.get("originLLM")) or text(generator.get("name")))
            if role == "assistant"
            else None,
        )

    def _content(self, raw: dict[str, Any], where: str) -> tuple[str, str]:
        if "fragments" not in raw:
            return text(raw.get("text")), ""
        parts: list[str] = []
        thinking: list[str] = []
        for i, fragment in enumerate(listed(raw.get("fragments"), f"{where}.fragments")):
            fragment = obj(fragment, f"{where}.fragments[{i}]")
            part = fragment.get("part") if isinstance(fragment.get("part"), dict) else {}
            kind = part.get("pt")
            if kind == "ma" and part.get("aType") == "reasoning":
                thinking.append(text(part.get("aText")))
            elif fragment.get("ft") == "attachment":
                meta = part.get("meta") if isinstance(part.get("meta"), dict) else {}
                name = text(meta.get("srcFileName")) or text(fragment.get("title"))
                parts.append(reference("image" if kind == "image_ref" else "file", name))
            elif kind == "text":
                parts.append(text(part.get("text")))
            elif kind == "error":
                parts.append(f"[error: {text(part.get('error'))[:500]}]")
            elif kind == "tool_invocation" and isinstance(part.get("invocation"), dict):
                call = part["invocation"]
                parts.append(tool_call(text(call.get("name")), call.get("args") or ""))
            elif kind == "image_ref":
                parts.append(reference("image", text(fragment.get("title")) or "image"))
        return joined(parts), joined(thinking)
