"""Chatbox's backup: Settings → Backup → Export (`chatbox-exported-data-<date>.json`).

Shape (Chatbox's own export code, its settings page's Export data, which writes the app's
storage keys as they are, and its session types, src/shared/types/session.ts in
chatboxai/chatbox): {"__exported_items",
"__exported_at", "settings", "chat-sessions-list": [{id, name}], "session:<id>": session}
(before v1.10 the sessions sat whole in "chat-sessions"). A session is {id, name, type,
messages, threads: [{id, name, messages, createdAt}], messageForksHash}; a message {id, role,
contentParts: [{type: text | image | reasoning | tool-call | info}] or the older `content`
text, reasoningContent, timestamp (milliseconds), model, files: [{name}], links: [{url}]}.
`messageForksHash[id].lists` holds the other continuations after message `id` (a
regenerated answer and what followed it): they become versions beside the shown one.
Earlier threads of a session (its "new thread" button) become chats of their own.
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


class ChatboxImporter:
    name = "chatbox"
    label = "Chatbox (backup file)"

    def detect(self, document: Any) -> bool:
        return isinstance(document, dict) and (
            "__exported_at" in document
            or "chat-sessions-list" in document
            or isinstance(document.get("chat-sessions"), list)
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        sessions: list[tuple[dict[str, Any], str]] = []
        for i, entry in enumerate(listed(document.get("chat-sessions-list"), "chat-sessions-list")):
            key = f"session:{text(obj(entry, f'chat-sessions-list[{i}]').get('id'))}"
            if isinstance(document.get(key), dict):
                sessions.append((document[key], key))
        for i, session in enumerate(listed(document.get("chat-sessions"), "chat-sessions")):
            sessions.append((obj(session, f"chat-sessions[{i}]"), f"chat-sessions[{i}]"))
        chats: list[ImportedChat] = []
        for session, where in sessions:
            for thread in listed(session.get("threads"), f"{where}.threads"):
                thread = obj(thread, f"{where}.threads")
                title = f"{text(session.get('name')) or 'Chat'} · {text(thread.get('name')) or 'thread'}"
                chat = self._chat(title, thread, {}, f"{where}.threads", limits)
                chat.source_id = f"{text(session.get('id'))}/{text(thread.get('id'))}"
                chats.append(chat)
            forks = (
                session.get("messageForksHash")
                if isinstance(session.get("messageForksHash"), dict)
                else {}
            )
            chat = self._chat(session.get("name"), session, forks, where, limits)
            chat.source_id = text(session.get("id")) or None
            chats.append(chat)
        return chats

    def _chat(
        self, title: Any, holder: dict, forks: dict, where: str, limits: dict
    ) -> ImportedChat:
        raw_messages = listed(holder.get("messages"), f"{where}.messages")
        prompt = ""
        if (
            raw_messages
            and isinstance(raw_messages[0], dict)
            and raw_messages[0].get("role") == "system"
        ):
            prompt = self._text(raw_messages[0], f"{where}.messages[0]")[0]
            raw_messages = raw_messages[1:]
        converted = [self._message(m, f"{where}.messages[{i}]") for i, m in enumerate(raw_messages)]
        stamps = [m["created_at"] for m in converted if m and m["created_at"]]
        chat = chat_of(
            title,
            where,
            limits,
            created_at=min(stamps)
            if stamps
            else time_of(holder.get("createdAt"), f"{where}.createdAt"),
            system_prompt=prompt,
        )
        keys: dict[str, str] = {}
        previous: str | None = None
        for index, (raw, fields) in enumerate(zip(raw_messages, converted, strict=True)):
            key = f"m{index}"
            keys[text(raw.get("id"))] = previous if fields is None else key
            if fields is not None:
                chat.messages.append({**fields, "key": key, "parent": previous, "selected": True})
                previous = key
        for fork_id, fork in forks.items():
            anchor = keys.get(fork_id)
            if not isinstance(fork, dict) or fork_id not in keys:
                continue
            for n, branch in enumerate(listed(fork.get("lists"), f"{where}.messageForksHash")):
                parent = anchor
                for i, raw in enumerate(
                    listed(branch.get("messages") if isinstance(branch, dict) else None, "lists")
                ):
                    fields = self._message(
                        raw, f"{where}.messageForksHash.{fork_id[:40]}.lists[{n}][{i}]"
                    )
                    if fields is not None:
                        key = f"f{fork_id[:40]}.{n}.{i}"
                        chat.messages.append(
                            {**fields, "key": key, "parent": parent, "selected": False}
                        )
                        parent = key
        return chat

    def _text(self, raw: dict[str, Any], where: str) -> tuple[str, str]:
        """(text, reasoning) of a message's parts, or of its older `content`."""
        parts: list[str] = []
        thinking = [text(raw.get("reasoningContent"))]
        for i, part in enumerate(listed(raw.get("contentParts"), f"{where}.contentParts")):
            part = obj(part, f"{where}.contentParts[{i}]")
            kind = part.get("type")
            if kind in ("text", "info"):
                parts.append(text(part.get("text")))
            elif kind == "reasoning":
                thinking.append(text(part.get("text")))
            elif kind == "image":
                parts.append(
                    reference("image", text(part.get("storageKey")) or text(part.get("url")))
                )
            elif kind == "tool-call":
                parts.append(tool_call(text(part.get("toolName")), part.get("args") or ""))
        if "contentParts" not in raw:
            parts.append(text(raw.get("content")))
        return joined(parts), joined(thinking)

    def _message(self, raw: Any, where: str) -> dict[str, Any] | None:
        raw = obj(raw, where)
        body, reasoning = self._text(raw, where)
        lines = [body]
        lines += [
            reference("file", text(f.get("name")))
            for f in listed(raw.get("files"), f"{where}.files")
            if isinstance(f, dict)
        ]
        lines += [
            reference("link", text(f.get("url")))
            for f in listed(raw.get("links"), f"{where}.links")
            if isinstance(f, dict)
        ]
        role = raw.get("role")
        if role not in ("user", "assistant", "system", "tool"):
            return None
        return message(
            "chatbox",
            "assistant" if role == "tool" else role,
            joined(lines),
            reasoning=reasoning,
            created_at=time_of(raw.get("timestamp"), f"{where}.timestamp"),
            model=text(raw.get("model")) if role == "assistant" else None,
        )
