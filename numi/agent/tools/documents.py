"""The tool `search_documents` (`use_rag`): the model asks for passages of the user's
documents (numi/knowledge: words and meaning fused, best first).

Every query is scoped to the calling user; with the chat setting `rag_scope: "chat"` only
the documents of that chat (its attachments and its project's files) are searched. Each
passage comes back with its source (document, heading path or page or lines) as a citation
source. A chat whose "Use documents" is automatic already carries the best passages for
each question in its system context; this tool finds more.

The chat setting `use_rag` is this tool being on (`"search_documents"` in settings["tools"]).
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from ...knowledge.index import ensure_indexed
from ...knowledge.retrieval import chat_documents, chat_project, retrieve
from . import Tool, ToolContext, ToolResult

DEFAULT_RESULTS = 5
MAX_RESULTS = 10
NAME = "search_documents"


def _run(arguments: dict[str, Any], context: ToolContext) -> ToolResult | str:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "Error: give a `query`: the words to look for in the user's documents."
    limit = arguments.get("limit", DEFAULT_RESULTS)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_RESULTS
    limit = max(1, min(limit, MAX_RESULTS))
    scope = (
        chat_documents(context.user_id, context.chat_id)
        if context.settings.get("rag_scope") == "chat"
        else None
    )
    # current_app is typed as the app it stands for; the real object is the proxy's.
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    busy = ensure_indexed(app, context.user_id, scope)
    # In a project's chat, the question's vector is made by the project's model, if it has one.
    project = chat_project(context.user_id, context.chat_id) if context.chat_id else None
    found = retrieve(context.user_id, query, limit=limit, attachment_ids=scope, project=project)
    note = (
        f"\n\n({busy} document{'s are' if busy != 1 else ' is'} still being indexed; "
        "search again later to include them.)"
        if busy
        else ""
    )
    if not found.passages:
        where = (
            "the documents attached to this chat" if scope is not None else "the user's documents"
        )
        return f"No passage in {where} matches {query!r}.{note}"
    sources = [
        {
            "title": passage.source,
            "url": None,
            "attachment_id": passage.document_id,
            "chunk": passage.chunk,
            "content": passage.text,
        }
        for passage in found.passages
    ]
    count = len(sources)
    lines = [f"{count} passage{'s' if count != 1 else ''} from the user's documents, best first:"]
    lines += [f"- {source['title']}:\n{source['content']}" for source in sources]
    return ToolResult("\n\n".join(lines) + note, sources)


SEARCH_DOCUMENTS = Tool(
    name=NAME,
    description=(
        "Search the user's uploaded documents (by words and by meaning, best matches first) "
        "and return the most relevant passages with their source. Cite the sources you use."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"How many passages (default {DEFAULT_RESULTS}).",
            },
        },
        "required": ["query"],
    },
    run=_run,
    timeout=30,
)
