"""Generated export files for the import tests and benchmarks (issue 34): a Numi chat, a
ChatGPT conversations.json shaped as a deep chain or a wide tree, a Numi project; any size,
so no big file is committed."""

from __future__ import annotations

from typing import Any

_ROLES = ("user", "assistant")


def numi_chat(messages: int, title: str = "Imported chat") -> dict[str, Any]:
    """A `numi.chat` export of `messages` alternating questions and answers."""
    return {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": title},
        "messages": [{"role": _ROLES[i % 2], "content": f"Message {i}."} for i in range(messages)],
    }


def project(chats: int, per_chat: int, name: str = "Imported project") -> dict[str, Any]:
    """A `numi.project` export of `chats` chats of `per_chat` messages each."""
    return {
        "format": "numi.project",
        "version": 1,
        "project": {"name": name},
        "memories": [],
        "files": [],
        "chats": [numi_chat(per_chat, f"Chat {c}") for c in range(chats)],
    }


def chatgpt_node(node_id: str, parent: str | None, role: str, text: str, time: float) -> dict:
    """One node of a ChatGPT conversation's `mapping`."""
    return {
        "id": node_id,
        "parent": parent,
        "children": [],
        "message": {
            "author": {"role": role},
            "content": {"content_type": "text", "parts": [text]},
            "create_time": time,
        },
    }


def _root() -> dict[str, Any]:
    return {"root": {"id": "root", "parent": None, "children": [], "message": None}}


def chatgpt_chain(depth: int, title: str = "Chain", text: str = "Step {i}.") -> list[dict]:
    """A ChatGPT conversations.json whose one conversation is a chain `depth` messages deep
    (`text` is formatted with the message's index)."""
    mapping, parent = _root(), "root"
    for i in range(depth):
        mapping[f"n{i}"] = chatgpt_node(f"n{i}", parent, _ROLES[i % 2], text.format(i=i), i)
        parent = f"n{i}"
    return [{"title": title, "mapping": mapping, "current_node": parent}]


def chatgpt_wide(width: int, title: str = "Wide") -> list[dict]:
    """A ChatGPT conversations.json: one question answered `width` times (regenerations)."""
    mapping = _root()
    mapping["q"] = chatgpt_node("q", "root", "user", "Which colour?", 1)
    for i in range(width):
        mapping[f"a{i}"] = chatgpt_node(f"a{i}", "q", "assistant", f"Colour {i}.", 2 + i)
    return [{"title": title, "mapping": mapping, "current_node": f"a{width - 1}"}]
