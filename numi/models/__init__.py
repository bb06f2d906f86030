"""SQLAlchemy models: the data of DESIGN §3.

JSON columns are stored as text (portable across SQLite and PostgreSQL) and exposed through
typed properties (`message.tool_calls`, `chat.settings`, ...). Chats and messages are
soft-deleted: `deleted_at` set, row kept; every query filters on it.

One module per part of the data: `accounts`, `endpoints`, `chats`, `files`, `user_setup`,
`projects`, with the column helpers in `columns`. Everything is imported here, so every
table is registered on the metadata, and `from numi.models import Chat` is the one way in.
"""

from .accounts import ApiToken, LoginFailure, SpentSignInLink, User
from .chats import Chat, ChatTag, Checkpoint, Message, QueuedMessage, usage_columns
from .columns import json_property, new_chat_id, utcnow
from .endpoints import REASONING_POLICIES, Endpoint
from .files import Attachment, DocumentIndex
from .projects import Memory, Project, ProjectFile
from .user_setup import McpServer, ModelPrice, Prompt, ToolSettings

__all__ = [
    "REASONING_POLICIES",
    "ApiToken",
    "Attachment",
    "Chat",
    "ChatTag",
    "Checkpoint",
    "DocumentIndex",
    "Endpoint",
    "LoginFailure",
    "McpServer",
    "Memory",
    "Message",
    "ModelPrice",
    "Project",
    "ProjectFile",
    "Prompt",
    "QueuedMessage",
    "SpentSignInLink",
    "ToolSettings",
    "User",
    "json_property",
    "new_chat_id",
    "usage_columns",
    "utcnow",
]
