"""LM Studio's conversations: one `<id>.conversation.json` per chat in
`~/.lmstudio/conversations/` (its "Show in folder" opens it).

Shape (the files LM Studio writes, as the parsers that read them document, e.g. the
LM Studio conversation parser of the session-search tools on GitHub): {name, createdAt
(milliseconds), systemPrompt, lastUsedModel: {identifier}, messages}. Each message is a
slot {versions: [...], currentlySelected: n}: its versions are its edits and regenerations,
the selected one is shown and the next slot follows it. A user version is {type:
"singleStep", role, content: [{type: "text", text} | {type: "file", name}]}; an assistant
version {type: "multiStep", role, senderInfo: {senderName}, steps: [{type: "contentBlock",
content: [{type: "text", text}], style: {type: "thinking"}?, genInfo: {identifier}} |
{type: "debugInfoBlock"} | ...]}. Thinking is a step styled "thinking", or `<think>` text.
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
)


class LMStudioImporter:
    name = "lm-studio"
    label = "LM Studio (a .conversation.json file)"

    def detect(self, document: Any) -> bool:
        if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
            return False
        first = document["messages"][0] if document["messages"] else None
        return isinstance(first, dict) and isinstance(first.get("versions"), list)

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        last = (
            document.get("lastUsedModel") if isinstance(document.get("lastUsedModel"), dict) else {}
        )
        chat = chat_of(
            document.get("name"),
            "conversation",
            limits,
            model=text(last.get("identifier")) or text(last.get("indexedModelIdentifier")),
            created_at=time_of(document.get("createdAt"), "createdAt"),
            system_prompt=document.get("systemPrompt"),
            source_id=document.get("createdAt"),  # the file has no id; its creation time is one
        )
        parent: str | None = None
        for n, slot in enumerate(listed(document.get("messages"), "messages")):
            slot = obj(slot, f"messages[{n}]")
            versions = listed(slot.get("versions"), f"messages[{n}].versions")
            chosen = slot.get("currentlySelected")
            if (
                not isinstance(chosen, int)
                or isinstance(chosen, bool)
                or not 0 <= chosen < len(versions)
            ):
                chosen = len(versions) - 1
            shown = parent
            for v, version in enumerate(versions):
                fields = self._version(
                    obj(version, f"messages[{n}].versions[{v}]"), f"messages[{n}].versions[{v}]"
                )
                if fields is None:
                    continue
                key = f"{n}.{v}"
                chat.messages.append(
                    {**fields, "key": key, "parent": parent, "selected": v == chosen}
                )
                if v == chosen:
                    shown = key
            parent = shown
        return [chat]

    def _version(self, raw: dict[str, Any], where: str) -> dict[str, Any] | None:
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            return None
        parts: list[str] = []
        thinking: list[str] = []
        model = None
        if raw.get("type") == "multiStep":
            for i, step in enumerate(listed(raw.get("steps"), f"{where}.steps")):
                step = obj(step, f"{where}.steps[{i}]")
                if step.get("type") != "contentBlock":
                    continue  # debug info, tool status: the app's own bookkeeping
                said = self._texts(step.get("content"), f"{where}.steps[{i}].content")
                style = step.get("style") if isinstance(step.get("style"), dict) else {}
                if style.get("type") == "thinking":
                    thinking.append(said)
                    continue
                thought, said = split_think(said)
                thinking.append(thought)
                parts.append(said)
                info = step.get("genInfo") if isinstance(step.get("genInfo"), dict) else {}
                model = model or text(info.get("identifier")) or None
            sender = raw.get("senderInfo") if isinstance(raw.get("senderInfo"), dict) else {}
            model = model or text(sender.get("senderName")) or None
        else:
            parts.append(self._texts(raw.get("content"), f"{where}.content"))
        return message("lm-studio", role, joined(parts), reasoning=joined(thinking), model=model)

    def _texts(self, content: Any, where: str) -> str:
        out = []
        for i, part in enumerate(listed(content, where)):
            part = obj(part, f"{where}[{i}]")
            if part.get("type") == "text":
                out.append(text(part.get("text")))
            elif part.get("type") == "file":
                out.append(
                    reference("file", text(part.get("name")) or text(part.get("fileIdentifier")))
                )
        return joined(out)
