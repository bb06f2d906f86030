"""LobeHub's (LobeChat's) data export: Settings → Data → Export.

Shapes (LobeHub's own importer and its test data, lobehub/lobe-chat
src/database/repositories/dataImporter/__tests__/fixtures/with-client-id.json):
- the database export: {schemaHash, mode, data: {messages, topics, sessions, agents,
  agentsToSessions, messagesFiles, files, ...}};
- the older browser export: {exportType, version, state: {messages, sessions, topics}}.
A topic is a chat {id, title, sessionId, createdAt}; a message {id, role, content, reasoning:
{content}, model, topicId, sessionId, parentId, tools, createdAt (ISO or milliseconds)}.
`parentId` makes regenerations siblings; the newest leaf is the branch shown. Messages
with no topic are the session's default topic. The agent's `systemRole` is the prompt.
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


class LobeHubImporter:
    name = "lobehub"
    label = "LobeHub (data export)"

    def detect(self, document: Any) -> bool:
        body = _body(document)
        return (
            isinstance(body, dict) and isinstance(body.get("messages"), list) and "topics" in body
        )

    def parse(self, document: Any, limits: dict[str, Any]) -> list[ImportedChat]:
        body = obj(_body(document), "data")
        topics = {
            text(t.get("id")): t
            for i, t in enumerate(listed(body.get("topics"), "data.topics"))
            if isinstance(obj(t, f"data.topics[{i}]").get("id"), str)
        }
        prompts, models = self._agents(body)
        names = self._file_names(body)
        groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for index, raw in enumerate(listed(body.get("messages"), "data.messages")):
            raw = obj(raw, f"data.messages[{index}]")
            group = text(raw.get("topicId")) or "session:" + (text(raw.get("sessionId")) or "inbox")
            groups.setdefault(group, []).append((index, raw))
        chats = []
        for group, members in groups.items():
            topic = topics.get(group, {})
            session = text(topic.get("sessionId")) or text(members[0][1].get("sessionId"))
            where = f"data.topics.{group[:40]}"
            chat = chat_of(
                topic.get("title") or ("Default topic" if group.startswith("session:") else None),
                where,
                limits,
                model=models.get(session),
                created_at=time_of(topic.get("createdAt"), f"{where}.createdAt"),
                system_prompt=prompts.get(session),
                source_id=group,
            )
            self._messages(chat, members, names)
            chats.append(chat)
        return chats

    def _messages(self, chat: ImportedChat, members: list[tuple[int, dict]], names: dict) -> None:
        converted: dict[str, dict[str, Any] | None] = {}
        nodes: dict[str, dict[str, Any]] = {}
        previous: str | None = None
        linked = any(isinstance(raw.get("parentId"), str) for _, raw in members)
        for index, raw in members:
            key = text(raw.get("id")) or f"#{index}"
            converted[key] = self._message(raw, f"data.messages[{index}]", names.get(key, []))
            stamp = time_of(raw.get("createdAt"), f"data.messages[{index}].createdAt")
            parent = text(raw.get("parentId")) or None if linked else previous
            nodes[key] = {"parent": parent, "order": order_key(stamp, index)}
            previous = key
        tree(chat, nodes, lambda key: converted[key], "data.messages")

    def _message(self, raw: dict[str, Any], where: str, files: list[str]) -> dict[str, Any] | None:
        role = raw.get("role")
        content = text(raw.get("content"))
        parts = (
            [content] if content != "..." else []
        )  # "..." is LobeHub's placeholder while loading
        for call in listed(raw.get("tools"), f"{where}.tools"):
            if isinstance(call, dict):
                parts.append(tool_call(text(call.get("apiName")), call.get("arguments") or ""))
        for kind, key, field in (("image", "imageList", "alt"), ("file", "fileList", "name")):
            for item in listed(raw.get(key), f"{where}.{key}"):
                if isinstance(item, dict):
                    parts.append(reference(kind, text(item.get(field)) or text(item.get("url"))))
        parts += [reference("file", name) for name in files]
        reasoning = raw.get("reasoning")
        thought = text(reasoning.get("content")) if isinstance(reasoning, dict) else ""
        stamp = time_of(raw.get("createdAt"), f"{where}.createdAt")
        if role == "tool":
            plugin = raw.get("plugin") if isinstance(raw.get("plugin"), dict) else {}
            return message(
                "lobehub",
                "assistant",
                tool_output(text(plugin.get("apiName")) or "tool", content),
                created_at=stamp,
            )
        if role not in ("user", "assistant", "system"):
            return None
        return message(
            "lobehub",
            role,
            joined(parts),
            reasoning=thought,
            created_at=stamp,
            model=text(raw.get("model")) if role == "assistant" else None,
        )

    def _agents(self, body: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        """Each session's system prompt and model, from its agent (or the old session config)."""
        prompts: dict[str, str] = {}
        models: dict[str, str] = {}
        agents = {
            text(a.get("id")): a
            for a in listed(body.get("agents"), "data.agents")
            if isinstance(a, dict)
        }
        for link in listed(body.get("agentsToSessions"), "data.agentsToSessions"):
            if isinstance(link, dict) and text(link.get("agentId")) in agents:
                agent = agents[text(link["agentId"])]
                prompts[text(link.get("sessionId"))] = text(agent.get("systemRole"))
                models[text(link.get("sessionId"))] = text(agent.get("model"))
        for session in listed(body.get("sessions"), "data.sessions"):
            config = session.get("config") if isinstance(session, dict) else None
            if isinstance(config, dict):
                prompts.setdefault(text(session.get("id")), text(config.get("systemRole")))
                models.setdefault(text(session.get("id")), text(config.get("model")))
        return prompts, models

    def _file_names(self, body: dict[str, Any]) -> dict[str, list[str]]:
        files = {
            text(f.get("id")): text(f.get("name"))
            for key in ("files", "globalFiles")
            for f in listed(body.get(key), f"data.{key}")
            if isinstance(f, dict)
        }
        names: dict[str, list[str]] = {}
        for link in listed(body.get("messagesFiles"), "data.messagesFiles"):
            if isinstance(link, dict):
                name = files.get(text(link.get("fileId"))) or text(link.get("fileId"))
                names.setdefault(text(link.get("messageId")), []).append(name)
        return names


def _body(document: Any) -> Any:
    if not isinstance(document, dict):
        return None
    return document.get("data") if isinstance(document.get("data"), dict) else document.get("state")
