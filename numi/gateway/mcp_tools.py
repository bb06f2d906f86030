"""The tools Numi's MCP server (/mcp, numi/web/mcp_server.py) offers a key's client.

Each tool needs one of the key's uses (numi.gateway.keys.USES): `history` for
`search_chats`, `list_chats` and `read_chat`, `documents` for `search_documents`, `web`
for `web_search` (the chat tool's own search, with the user's Settings → Web search),
`chat` for `ask` (numi/gateway/mcp_ask.py). A key lists only the tools its uses allow. Every
query is scoped to the key's owner; a refusal is a NumiError with its stable code, which
the server sends back as the tool's error result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask

from ..agent.tools import ToolContext, ToolFailure
from ..agent.tools.web import WEB_SEARCH
from ..chat import chats as chat_store
from ..chat import search as chat_search
from ..chat.export import load_transcript
from ..errors import NumiError, invalid
from ..extensions import db
from ..knowledge.index import ensure_indexed
from ..knowledge.retrieval import retrieve
from ..models import Chat, Message, User
from ..models.columns import iso
from .keys import Grant, allows_use
from .mcp_ask import ASK_SCHEMA, ask


@dataclass(frozen=True)
class ToolCall:
    """One call: the app (for its settings and the document index), the checked key and
    the client's arguments (a dict)."""

    app: Flask
    key: Grant
    arguments: dict[str, Any]


@dataclass(frozen=True)
class McpTool:
    name: str
    use: str  # the key's use it needs
    title: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ToolCall], tuple[str, dict[str, Any]]]  # (text, structured content)

    def listed(self) -> dict[str, Any]:
        """The tool as `tools/list` describes it."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "readOnlyHint": self.use != "chat",
                "openWorldHint": self.use == "web",
            },
        }


def _text(arguments: dict[str, Any], name: str, most: int) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"Give `{name}`: some text.", "invalid_arguments")
    if len(value) > most:
        raise invalid(f"`{name}` has at most {most} characters.", "invalid_arguments")
    return value


def _count(arguments: dict[str, Any], name: str, default: int, most: int) -> int:
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise invalid(f"`{name}` must be a whole number from 1 to {most}.", "invalid_arguments")
    return value


def _chat_summary(chat: Chat) -> dict[str, Any]:
    return {
        "chat_id": chat.id,
        "title": chat.title,
        "updated_at": iso(chat.updated_at),
        "api_key": chat.api_key_name,
    }


def _search_chats(call: ToolCall) -> tuple[str, dict[str, Any]]:
    query = _text(call.arguments, "query", chat_search.MAX_QUERY_CHARS)
    limit = _count(call.arguments, "limit", 10, 50)
    found = chat_search.search(call.key.user_id, query, limit=limit)
    result = {
        "chats": [_chat_summary(chat) for chat in found.chats],
        "messages": [hit.to_dict() for hit in found.messages],
    }
    lines = [f"Chats titled like {query!r}: {len(found.chats)}."]
    lines += [f"- {c.title} (chat_id {c.id})" for c in found.chats]
    lines.append(f"Messages that match: {len(found.messages)}.")
    lines += [
        f"- in {h.chat_title!r} (chat_id {h.chat_id}), {h.role}: "
        + "".join(t for t, _ in h.segments)
        for h in found.messages
    ]
    return "\n".join(lines), result


def _list_chats(call: ToolCall) -> tuple[str, dict[str, Any]]:
    limit = _count(call.arguments, "limit", 20, 100)
    cursor = call.arguments.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise invalid("`cursor` is the next_cursor of an earlier list_chats.", "invalid_arguments")
    page = chat_store.list_chats(call.key.user_id, limit=limit, cursor=cursor or None, view="all")
    result = {"chats": [_chat_summary(c) for c in page.items], "next_cursor": page.next_cursor}
    lines = [f"- {c.title} (chat_id {c.id}, {iso(c.updated_at)})" for c in page.items]
    if page.next_cursor:
        lines.append(f"More: list_chats with cursor {page.next_cursor!r}.")
    return "\n".join(lines) or "No chats yet.", result


def _message_view(message: Message) -> dict[str, Any]:
    return {
        "message_id": message.id,
        "role": message.role,
        "content": message.content or "",
        "model": message.model,
        "created_at": iso(message.created_at),
    }


def _read_chat(call: ToolCall) -> tuple[str, dict[str, Any]]:
    chat_id = _text(call.arguments, "chat_id", 36)
    limit = _count(call.arguments, "limit", 100, 1000)
    chat = chat_store.get_chat(call.key.user_id, chat_id)
    shown = [m for m in load_transcript(chat) if m.role in ("user", "assistant")]
    messages = [_message_view(m) for m in shown[-limit:]]
    result = {**_chat_summary(chat), "messages": messages, "left_out": len(shown) - len(messages)}
    lines = [f"# {chat.title}"]
    if result["left_out"]:
        lines.append(f"({result['left_out']} earlier messages left out.)")
    lines += [f"\n{m['role']}:\n{m['content']}" for m in messages]
    return "\n".join(lines), result


def _search_documents(call: ToolCall) -> tuple[str, dict[str, Any]]:
    query = _text(call.arguments, "query", 2000)
    limit = _count(call.arguments, "limit", 5, 10)
    busy = ensure_indexed(call.app, call.key.user_id, None)
    found = retrieve(call.key.user_id, query, limit=limit)
    result = {
        "passages": [p.to_dict() | {"source": p.source} for p in found.passages],
        "mode": found.mode,
        "still_indexing": busy,
    }
    if not found.passages:
        return f"No passage of the user's documents matches {query!r}.", result
    lines = [f"{len(found.passages)} passages from the user's documents, best first:"]
    lines += [f"- {p.source}:\n{p.text}" for p in found.passages]
    return "\n\n".join(lines), result


def _web_search(call: ToolCall) -> tuple[str, dict[str, Any]]:
    query = _text(call.arguments, "query", 500)
    count = _count(call.arguments, "count", 5, 10)
    user = db.session.get(User, call.key.user_id)
    # Settings and the host rules are the user's, as for the tool in a chat; no chat here.
    context = ToolContext(
        user_id=call.key.user_id, chat_id="", is_admin=bool(user and user.is_admin)
    )
    try:
        found = WEB_SEARCH.run({"query": query, "count": count}, context)
    except ToolFailure as exc:
        raise NumiError(exc.code, exc.text.removeprefix("Error: "), 400) from None
    if isinstance(found, str):
        return found, {"results": []}
    results = [
        {"title": s["title"], "url": s["url"], "snippet": s["content"]} for s in found.sources
    ]
    lines = [f"Web results for {query!r}:"]
    lines += [f"- {r['title']} ({r['url']})\n{r['snippet']}" for r in results]
    return "\n".join(lines), {"results": results}


def _schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_QUERY = {"type": "string", "description": "The words to look for."}


def _limit(default: int, most: int, what: str) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": most,
        "description": f"How many {what} (default {default}).",
    }


TOOLS = (
    McpTool(
        "search_chats",
        "history",
        "Search chats",
        "Search the user's Numi chats: chats whose title matches, and messages whose text "
        "matches, newest first. Read a whole chat with read_chat.",
        _schema({"query": _QUERY, "limit": _limit(10, 50, "chats and messages")}, "query"),
        _search_chats,
    ),
    McpTool(
        "list_chats",
        "history",
        "List chats",
        "The user's Numi chats, most recently active first, with their ids.",
        _schema(
            {
                "limit": _limit(20, 100, "chats"),
                "cursor": {"type": "string", "description": "next_cursor of the last page."},
            }
        ),
        _list_chats,
    ),
    McpTool(
        "read_chat",
        "history",
        "Read a chat",
        "The messages of one of the user's Numi chats (the shown versions), oldest first.",
        _schema(
            {
                "chat_id": {"type": "string", "description": "The chat's id."},
                "limit": _limit(100, 1000, "of the newest messages"),
            },
            "chat_id",
        ),
        _read_chat,
    ),
    McpTool(
        "search_documents",
        "documents",
        "Search documents",
        "Search the user's documents in Numi (by words and by meaning, best first) and "
        "return the passages with their source. Cite the sources you use.",
        _schema({"query": _QUERY, "limit": _limit(5, 10, "passages")}, "query"),
        _search_documents,
    ),
    McpTool(
        "web_search",
        "web",
        "Search the web",
        "Search the web through the user's own search settings in Numi (SearXNG or Brave); "
        "results with title, URL and snippet.",
        _schema(
            {"query": _QUERY, "count": _limit(5, 10, "results")},
            "query",
        ),
        _web_search,
    ),
    McpTool(
        "ask",
        "chat",
        "Ask a model",
        "Ask one of the user's models through Numi. The question and its answer are kept "
        "as a Numi chat; pass the returned chat_id to continue it.",
        ASK_SCHEMA,
        lambda call: ask(call.app, call.key, call.arguments),
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def tools_for(key: Grant) -> list[McpTool]:
    """The tools the key's uses allow."""
    return [tool for tool in TOOLS if allows_use(key, tool.use)]
