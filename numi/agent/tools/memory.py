"""`remember`: the model proposes a memory; the user's yes writes it.

The tool always asks (`always_ask`: no chat setting, not even auto-approve, turns the
question off), and its card shows the exact text (templates/partials/_tool_card.html), bound
to the call's digest like a bash command: what is written is what the user read. A denial,
memory being off, or a text the memory rules refuse writes nothing; the model reads why.
"""

from __future__ import annotations

from flask import current_app
from sqlalchemy import select

from ...chat import memories as memory_store
from ...errors import NumiError
from ...extensions import db
from ...models import Chat
from . import Tool, ToolContext, ToolFailure


def _remember(arguments: dict, context: ToolContext) -> str:
    if not memory_store.memory_enabled(context.user_id):
        raise ToolFailure(
            "memory_off",
            "Memory is off for this user (Settings → Memory); nothing was remembered.",
        )
    project_id = None
    if arguments.get("scope") == "project":
        project_id = db.session.execute(
            select(Chat.project_id).where(
                Chat.id == context.chat_id, Chat.user_id == context.user_id
            )
        ).scalar()
        if project_id is None:
            raise ToolFailure("no_project", "This chat is in no project; nothing was remembered.")
    try:
        memory = memory_store.create_memory(
            context.user_id, arguments.get("text"), project_id, current_app.config
        )
    except NumiError as error:
        raise ToolFailure(error.code, f"{error.message} Nothing was remembered.") from None
    where = "for this project" if project_id else "for every chat"
    return f"Remembered {where}: {memory.text}"


REMEMBER = Tool(
    name="remember",
    description=(
        "Propose one short fact to remember about the user or their work, for future chats. "
        "The user sees the exact text and approves or denies it; only an approved memory is "
        "kept. Use it when the user asks you to remember something or states a lasting "
        "preference, never for passing details."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The fact, as one short sentence in the user's terms.",
            },
            "scope": {
                "type": "string",
                "enum": ["user", "project"],
                "description": "user: every chat (default); project: this chat's project only.",
            },
        },
        "required": ["text"],
    },
    run=_remember,
    needs_approval=True,
    always_ask=True,
    writes_memory=True,
)
