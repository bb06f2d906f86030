"""Cherry Studio's backup: Settings → Data → Backup (`data.json`, also inside its zip).

Shape (Cherry Studio's own backup code, CherryHQ/cherry-studio
src/renderer/src/services/BackupService.ts, which writes {time, version, localStorage,
indexedDB}; and the importers of
other apps that read it, e.g. AetherLink's `isDesktopBackupFormat`): `indexedDB.topics` is
[{id, messages}], `indexedDB.message_blocks` the blocks messages point to, and
`localStorage["persist:cherry-studio"]` the app's persisted state, a JSON text whose
`assistants` value is itself JSON text: {assistants: [{id, name, prompt, topics: [{id,
name, createdAt}]}]}. A message is {id, role, createdAt, model: {id, name}, blocks: [ids],
askId, foldSelected} (before v1.3: `content` and `reasoning_content` on the message). Answers
sharing an `askId` are versions of the answer to that question (regenerations, or several
models at once); `foldSelected` marks the one shown. A block is {type: main_text | thinking
| code | image | file | tool | error | citation | translation, content, file, language}.
"""

from __future__ import annotations

import json
from typing import Any

from .shapes import (
    ImportedChat,
    chat_of,
    fenced,
    joined,
    listed,
    message,
    obj,
    reference,
    text,
    time_of,
    tool_call,
)


class CherryStudioImporter:
    name = "cherry-studio"
    label = "Cherry Studio (backup)"

    def detect(self, document: Any) -> bool:
        return (
            isinstance(document, dict)
            and isinstance(document.get("indexedDB"), dict)
            and ("topics" in document["indexedDB"] or "message_blocks" in document["indexedDB"])
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        store = obj(document.get("indexedDB"), "indexedDB")
        blocks = {
            text(b.get("id")): b
            for b in listed(store.get("message_blocks"), "indexedDB.message_blocks")
            if isinstance(b, dict)
        }
        topics, prompts = _persisted(document.get("localStorage"))
        chats = []
        for i, raw in enumerate(listed(store.get("topics"), "indexedDB.topics")):
            raw = obj(raw, f"indexedDB.topics[{i}]")
            where = f"indexedDB.topics[{i}]"
            info = topics.get(text(raw.get("id")), {})
            messages = [
                obj(m, f"{where}.messages[{n}]")
                for n, m in enumerate(listed(raw.get("messages"), f"{where}.messages"))
            ]
            if not messages:
                continue
            chat = chat_of(
                info.get("name"),
                where,
                limits,
                created_at=time_of(info.get("createdAt"), f"{where}.createdAt"),
                system_prompt=info.get("prompt") or prompts.get(text(info.get("assistantId"))),
                source_id=raw.get("id"),
            )
            self._messages(chat, messages, blocks, where)
            chats.append(chat)
        return chats

    def _messages(self, chat: ImportedChat, messages: list[dict], blocks: dict, where: str) -> None:
        """Questions follow the answer shown before them; answers hang under their question."""
        tip: str | None = None
        answers: dict[str, list[str]] = {}  # question key -> its answers' keys
        shown: dict[str, str] = {}
        for n, raw in enumerate(messages):
            fields = self._message(raw, blocks, f"{where}.messages[{n}]")
            if fields is None:
                continue
            key = text(raw.get("id")) or f"#{n}"
            ask = text(raw.get("askId"))
            if raw.get("role") == "assistant" and ask in answers:
                parent = ask
                answers[ask].append(key)
                if raw.get("foldSelected") is True or ask not in shown:
                    shown[ask] = key
            else:
                parent = shown.get(tip, tip) if tip is not None else None
                answers[key] = []
                tip = key
            chat.messages.append({**fields, "key": key, "parent": parent})
        for question, keys in answers.items():
            for fields in chat.messages:
                if fields["key"] in keys:
                    fields["selected"] = fields["key"] == shown.get(question)

    def _message(self, raw: dict[str, Any], blocks: dict, where: str) -> dict[str, Any] | None:
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            return None
        parts = [text(raw.get("content"))]
        thinking = [text(raw.get("reasoning_content"))]
        for block_id in listed(raw.get("blocks"), f"{where}.blocks"):
            block = blocks.get(block_id if isinstance(block_id, str) else "")
            if not isinstance(block, dict):
                continue
            kind, content = block.get("type"), text(block.get("content"))
            if kind == "thinking":
                thinking.append(content)
            elif kind == "code":
                parts.append(fenced(content, text(block.get("language"))))
            elif kind in ("image", "file"):
                item = block.get("file") if isinstance(block.get("file"), dict) else {}
                parts.append(
                    reference(
                        kind,
                        text(item.get("origin_name"))
                        or text(item.get("name"))
                        or text(block.get("url")),
                    )
                )
            elif kind == "tool":
                parts.append(
                    tool_call(
                        text(block.get("toolName")) or "tool", block.get("arguments") or content
                    )
                )
            elif kind == "error":
                error = block.get("error") if isinstance(block.get("error"), dict) else {}
                parts.append(f"[error: {text(error.get('message'))[:500]}]")
            elif kind in ("main_text", "translation"):
                parts.append(content)
        for item in listed(raw.get("files"), f"{where}.files"):
            if isinstance(item, dict):
                parts.append(
                    reference("file", text(item.get("origin_name")) or text(item.get("name")))
                )
        model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
        return message(
            "cherry-studio",
            role,
            joined(parts),
            reasoning=joined(thinking),
            created_at=time_of(raw.get("createdAt"), f"{where}.createdAt"),
            model=(text(model.get("id")) or text(raw.get("modelId")))
            if role == "assistant"
            else None,
        )


def _persisted(local: Any) -> tuple[dict[str, dict], dict[str, str]]:
    """Topics' names and dates and assistants' prompts from the persisted state (each level is
    JSON text); a backup without it, or with it unreadable, still imports, untitled."""
    topics: dict[str, dict] = {}
    prompts: dict[str, str] = {}
    try:
        state = json.loads(local["persist:cherry-studio"])
        assistants = json.loads(state["assistants"])["assistants"]
    except (TypeError, KeyError, ValueError):
        return topics, prompts
    for assistant in assistants if isinstance(assistants, list) else []:
        if not isinstance(assistant, dict):
            continue
        prompts[text(assistant.get("id"))] = text(assistant.get("prompt"))
        for topic in assistant.get("topics") or []:
            if isinstance(topic, dict):
                topics[text(topic.get("id"))] = {**topic, "assistantId": text(assistant.get("id"))}
    return topics, prompts
