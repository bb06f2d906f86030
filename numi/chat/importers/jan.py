"""Jan's threads: each thread is a folder of `thread.json` and `messages.jsonl`.

Shape (Jan's own type of what it stores, janhq/jan core/src/types/message/messageEntity.ts,
`ThreadMessage`, one JSON object a line): {id, object: "thread.message", thread_id, role,
content: [{type: "text" | "reasoning", text: {value, annotations}} | {type: "image_url",
image_url: {url}} | {type: "tool_call", tool_name, input, output}], created_at (Unix time;
`created` in older versions), attachments: [{file_id}], metadata}. Older versions kept a
reasoning model's thinking in the text as `<think>…</think>`. Import the
thread's `messages.jsonl` (JSON lines, or the same objects as one JSON list); the thread's
title lives in `thread.json`, so the chat is named after its first question. Each
`thread_id` in the file becomes one chat.
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
    split_think,
    text,
    time_of,
    tool_call,
    tool_output,
)


class JanImporter:
    name = "jan"
    label = "Jan (a thread's messages.jsonl)"

    def detect(self, document: Any) -> bool:
        first = document[0] if isinstance(document, list) and document else document
        return isinstance(first, dict) and first.get("object") == "thread.message"

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        document = document if isinstance(document, list) else [document]  # a one-line file
        threads: dict[str, list[tuple[int, dict]]] = {}
        for i, raw in enumerate(listed(document, "messages", optional=False)):
            raw = obj(raw, f"messages[{i}]")
            threads.setdefault(text(raw.get("thread_id")), []).append((i, raw))
        chats = []
        for thread_id, members in threads.items():
            converted = [self._message(raw, f"messages[{i}]") for i, raw in members]
            kept = [m for m in converted if m is not None]
            first_question = next((m["content"] for m in kept if m["role"] == "user"), "")
            prompt = joined(m["content"] for m in kept if m["role"] == "system")
            chat = chat_of(
                first_question.splitlines()[0][:80] if first_question else None,
                "thread",
                limits,
                created_at=kept[0]["created_at"] if kept else None,
                system_prompt=prompt,
                source_id=thread_id,
            )
            chat.messages += [m for m in kept if m["role"] != "system"]
            chats.append(chat)
        return chats

    def _message(self, raw: dict[str, Any], where: str) -> dict[str, Any] | None:
        role = raw.get("role")
        if role not in ("user", "assistant", "system", "tool"):
            return None
        parts: list[str] = []
        thinking: list[str] = []
        for i, part in enumerate(listed(raw.get("content"), f"{where}.content")):
            part = obj(part, f"{where}.content[{i}]")
            value = part.get("text")
            said = text(value.get("value")) if isinstance(value, dict) else text(value)
            if part.get("type") == "text":
                thought, said = split_think(said)
                thinking.append(thought)
                parts.append(tool_output("tool", said) if role == "tool" else said)
            elif part.get("type") == "reasoning":
                thinking.append(said)
            elif part.get("type") == "tool_call":
                name = text(part.get("tool_name"))
                parts.append(tool_call(name, part.get("input") or ""))
                if part.get("output") is not None:
                    parts.append(tool_output(name, part["output"]))
            elif part.get("type") == "image_url":
                url = part.get("image_url")
                parts.append(
                    reference("image", text(url.get("url")) if isinstance(url, dict) else text(url))
                )
        for item in listed(raw.get("attachments"), f"{where}.attachments"):
            if isinstance(item, dict):
                parts.append(reference("file", text(item.get("name")) or text(item.get("file_id"))))
        metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        stamp = raw.get("created_at") if raw.get("created_at") is not None else raw.get("created")
        return message(
            "jan",
            "assistant" if role == "tool" else role,
            joined(parts),
            reasoning=joined(thinking),
            created_at=time_of(stamp, f"{where}.created_at"),
            model=text(metadata.get("model")) or text(raw.get("model"))
            if role == "assistant"
            else None,
        )
