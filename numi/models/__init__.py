"""SQLAlchemy models: the data of DESIGN §3.

JSON columns are stored as text (portable across SQLite and PostgreSQL) and exposed through
typed properties (`message.tool_calls`, `chat.settings`, ...). Chats and messages are
soft-deleted: `deleted_at` set, row kept; every query filters on it.

One module per part of the data: `accounts`, `endpoints`, `chats`, `files`, `user_setup`,
`projects`, `imports`, `tasks`, `research`, `gateway`, `shares`, `budgets`, with the column helpers and
`get_owned` (a user's row by id, or 404) in `columns`. Everything is imported here, so every
table is registered on the metadata, and `from numi.models import Chat` is the one way in.
"""

from .accounts import ApiToken, LoginFailure, SpentSignInLink, User
from .budgets import Budget, BudgetPeriod
from .chats import (
    Chat,
    ChatTag,
    Checkpoint,
    Message,
    QueuedMessage,
    RedactedValue,
    usage_columns,
)
from .columns import get_owned, json_property, new_chat_id, utcnow
from .endpoints import REASONING_POLICIES, Endpoint
from .files import Attachment, DocumentChunk, DocumentIndex
from .gateway import ApiKey, ApiRequest, ApiThreadPoint, ModelAlias
from .imports import ImportJob
from .projects import Memory, Project, ProjectFile
from .research import ResearchRun, ResearchSource
from .shares import AUDIENCES, Share
from .tasks import Task, TaskRun
from .user_setup import McpServer, ModelPrice, Prompt, ToolSettings

__all__ = [
    "AUDIENCES",
    "REASONING_POLICIES",
    "ApiKey",
    "ApiRequest",
    "ApiThreadPoint",
    "ModelAlias",
    "ApiToken",
    "Attachment",
    "Budget",
    "BudgetPeriod",
    "Chat",
    "ChatTag",
    "Checkpoint",
    "DocumentChunk",
    "DocumentIndex",
    "Endpoint",
    "ImportJob",
    "LoginFailure",
    "McpServer",
    "Memory",
    "Message",
    "ModelPrice",
    "Project",
    "ProjectFile",
    "Prompt",
    "QueuedMessage",
    "ResearchRun",
    "ResearchSource",
    "RedactedValue",
    "Share",
    "SpentSignInLink",
    "Task",
    "TaskRun",
    "ToolSettings",
    "User",
    "get_owned",
    "json_property",
    "new_chat_id",
    "usage_columns",
    "utcnow",
]
