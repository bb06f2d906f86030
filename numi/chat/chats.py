"""Chats and their transcripts: the one place that loads a chat for a user.

Every function takes the owner's user id and filters by it; a missing, deleted or foreign
chat raises `NotFound` (404), never a permission error that would confirm it exists.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, or_, select
from sqlalchemy.orm import joinedload

from ..data_dir import touches_data_dir
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import Chat, ChatTag, Endpoint, Message, Project, QueuedMessage, User, utcnow
from .. import endpoints as endpoint_store

REASONING_EFFORTS = ("", "none", "minimal", "low", "medium", "high")


@dataclass
class Page:
    items: list
    next_cursor: str | None
    pinned: list = field(default_factory=list)  # the sidebar's first page: its Pinned group


PINNED_LIMIT = 100


# Built once: every send and page of a chat reads it.
_LIVE_CHAT = select(Chat).where(
    Chat.id == bindparam("chat_id"), Chat.user_id == bindparam("user_id"), Chat.deleted_at.is_(None)
)


def get_chat(user_id: int, chat_id: str) -> Chat:
    """The user's live chat `chat_id`, or NotFound."""
    if not isinstance(chat_id, str) or len(chat_id) > 36:
        raise NotFound()
    chat = db.session.execute(
        _LIVE_CHAT, {"chat_id": chat_id, "user_id": user_id}
    ).scalar_one_or_none()
    if chat is None:
        raise NotFound()
    return chat


def list_chats(
    user_id: int,
    *,
    limit: int,
    cursor: str | None = None,
    query: str = "",
    tag: str = "",
    view: str = "sidebar",
    project_id: int | None = None,
    until: str | None = None,
) -> Page:
    """Chats by last activity, newest first, keyset-paginated so 10,000 chats stay fast.
    `until` (a cursor) ends the list above that chat: the sidebar's gap between its first
    page and an open chat's neighbourhood.

    `view` "sidebar": neither archived nor pinned (the first page carries the pinned chats
    in `pinned`), and, unless a `tag` or `project_id` filters it, not in a project (a
    project's chats are listed on its page, as ChatGPT does; pinned ones stay pinned);
    "archived": the archived chats; "all": every live chat. A title `query` searches every
    live chat, archived, pinned and projects' ones included. `tag` keeps the chats with that tag. Tags come with
    the chats (in the same query). The cursor is `<updated_at iso>|<id>` of the last chat
    of the previous page.
    """
    stmt = select(Chat).where(
        Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.temporary.is_(False)
    )
    if project_id is not None:  # checked by the caller (`project_ref`): the user's project
        stmt = stmt.where(Chat.project_id == project_id)
    if tag:
        stmt = stmt.where(
            Chat.id.in_(
                select(ChatTag.chat_id).where(ChatTag.user_id == user_id, ChatTag.tag == tag)
            )
        )
    pinned: list[Chat] = []
    if query:
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = stmt.where(Chat.title.ilike(f"%{escaped}%", escape="\\"))
    elif view == "archived":
        stmt = stmt.where(Chat.archived_at.is_not(None))
    elif view != "all":
        if not cursor:
            pinned = list(
                db.session.execute(
                    stmt.where(Chat.archived_at.is_(None), Chat.pinned_at.is_not(None))
                    .options(joinedload(Chat.tag_rows))
                    .order_by(Chat.pinned_at.desc(), Chat.id)
                    .limit(PINNED_LIMIT)
                )
                .unique()
                .scalars()
            )
        stmt = stmt.where(Chat.archived_at.is_(None), Chat.pinned_at.is_(None))
        if project_id is None and not tag:
            stmt = stmt.where(Chat.project_id.is_(None))
    if cursor:
        updated_at, chat_id = _parse_cursor(cursor)
        stmt = stmt.where(
            or_(
                Chat.updated_at < updated_at, and_(Chat.updated_at == updated_at, Chat.id < chat_id)
            )
        )
    if until:
        updated_at, chat_id = _parse_cursor(until)
        stmt = stmt.where(
            or_(
                Chat.updated_at > updated_at, and_(Chat.updated_at == updated_at, Chat.id > chat_id)
            )
        )
    # Tags come in the same statement (a join on the limited page), not a second query: on
    # PostgreSQL under gevent each round trip waits its turn on a busy hub, and the sidebar
    # is on every page load.
    stmt = (
        stmt.options(joinedload(Chat.tag_rows))
        .order_by(Chat.updated_at.desc(), Chat.id.desc())
        .limit(limit + 1)
    )
    chats = list(db.session.execute(stmt).unique().scalars())
    next_cursor = None
    if len(chats) > limit:
        chats = chats[:limit]
        next_cursor = cursor_of(chats[-1])
    return Page(chats, next_cursor, pinned)


def date_group(moment: datetime, now: datetime) -> str:
    """The sidebar group of a chat last active at `moment` (both in the user's local time):
    Today, Yesterday, Previous 7 days, Previous 30 days, then the month ("March 2026")."""
    days = (now.date() - moment.date()).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    if days < 7:
        return "Previous 7 days"
    if days < 30:
        return "Previous 30 days"
    return f"{moment:%B %Y}"


def chats_listed_before(user_id: int, chat: Chat) -> int:
    """How many chats the sidebar lists above `chat` (one counting query)."""
    return db.session.execute(
        select(func.count()).select_from(Chat).where(*_listed_above(user_id, chat))
    ).scalar_one()


def chats_just_above(user_id: int, chat: Chat, count: int) -> list[Chat]:
    """The `count` chats the sidebar lists right above `chat`, newest first."""
    if count <= 0:
        return []
    rows = db.session.execute(
        select(Chat)
        .where(*_listed_above(user_id, chat))
        .options(joinedload(Chat.tag_rows))
        .order_by(Chat.updated_at, Chat.id)
        .limit(count)
    )
    return list(rows.unique().scalars())[::-1]


def cursor_of(chat: Chat) -> str:
    """The keyset cursor that lists the chats after `chat` (or, as `until`, before it)."""
    return f"{chat.updated_at.isoformat()}|{chat.id}"


def _listed_above(user_id: int, chat: Chat) -> tuple:
    """The sidebar's chats (not pinned, archived or in a project) listed above `chat`."""
    return (
        Chat.user_id == user_id,
        Chat.deleted_at.is_(None),
        Chat.temporary.is_(False),
        Chat.archived_at.is_(None),
        Chat.pinned_at.is_(None),
        Chat.project_id.is_(None),
        or_(
            Chat.updated_at > chat.updated_at,
            and_(Chat.updated_at == chat.updated_at, Chat.id > chat.id),
        ),
    )


def newest_empty_chat(user_id: int) -> Chat | None:
    """The user's newest live chat without a live message and with its first title: what
    "+ New chat" reuses instead of leaving one more empty chat behind."""
    has_message = (
        select(Message.id).where(Message.chat_id == Chat.id, Message.deleted_at.is_(None)).exists()
    )
    return db.session.execute(
        select(Chat)
        .where(
            Chat.user_id == user_id,
            Chat.deleted_at.is_(None),
            Chat.temporary.is_(False),
            Chat.archived_at.is_(None),
            Chat.title == "New chat",
            Chat.project_id.is_(None),  # an empty chat of a project stays its project's
            ~has_message,
        )
        .order_by(Chat.updated_at.desc(), Chat.id.desc())
        .limit(1)
    ).scalar_one_or_none()


def owned_chat_ids(user_id: int, chat_ids: list[str]) -> list[str]:
    """Those of `chat_ids` that are the user's live chats (one query)."""
    if not chat_ids:
        return []
    return list(
        db.session.execute(
            select(Chat.id).where(
                Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.id.in_(chat_ids)
            )
        ).scalars()
    )


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        stamp, chat_id = cursor.split("|", 1)
        return datetime.fromisoformat(stamp), chat_id
    except ValueError:
        raise invalid("Malformed cursor.", "invalid_cursor") from None


def create_chat(
    user_id: int, fields: dict[str, Any], limits: dict[str, Any], *, temporary: bool = False
) -> Chat:
    """Create a chat from user input (title, endpoint_id, model, settings); a `temporary`
    one is listed nowhere (numi/chat/temporary.py)."""
    chat = Chat(user_id=user_id, temporary=temporary)
    _apply(chat, user_id, fields, limits)
    if chat.endpoint_id is None:
        default = endpoint_store.default_route(user_id)
        if default:
            chat.endpoint_id, chat.model = (
                default.id,
                chat.model or endpoint_store.first_model(default),
            )
    db.session.add(chat)
    db.session.commit()
    return chat


def update_chat(user_id: int, chat_id: str, fields: dict[str, Any], limits: dict[str, Any]) -> Chat:
    """Apply a partial update; validation happens before anything is written."""
    chat = get_chat(user_id, chat_id)
    _apply(chat, user_id, fields, limits)
    db.session.commit()
    return chat


def touch_chat(chat: Chat) -> None:
    """Mark the chat as active now (it moves to the top of the sidebar)."""
    chat.updated_at = utcnow()
    db.session.commit()


def delete_chat(user_id: int, chat_id: str) -> None:
    chat = get_chat(user_id, chat_id)
    chat.deleted_at = utcnow()
    # What waited to be sent goes with it (the chat's rows stay for soft delete; these need not).
    db.session.execute(delete(QueuedMessage).where(QueuedMessage.chat_id == chat.id))
    db.session.commit()


def _apply(chat: Chat, user_id: int, fields: dict[str, Any], limits: dict[str, Any]) -> None:
    """Validate every field first, then assign: a bad field changes nothing."""
    updates: dict[str, Any] = {}
    if "title" in fields:
        title = _text(fields["title"], "title", limits["NUMI_MAX_TITLE_CHARS"]).strip()
        updates["title"] = title or "New chat"
    if "endpoint_id" in fields and fields["endpoint_id"] not in (None, ""):
        try:
            endpoint_id = int(fields["endpoint_id"])
        except (TypeError, ValueError):
            raise invalid("endpoint_id must be a number.") from None
        endpoint: Endpoint = endpoint_store.get_endpoint(user_id, endpoint_id)
        updates["endpoint_id"] = endpoint.id
    if "model" in fields:
        model = _text(fields["model"] or "", "model", 200).strip()
        updates["model"] = model or None
    if "project_id" in fields:
        updates["project_id"] = project_ref(user_id, fields["project_id"])
    settings = dict(chat.settings)
    if "settings" in fields:
        if not isinstance(fields["settings"], dict):
            raise invalid("settings must be an object.")
        settings.update(validate_settings(fields["settings"], limits))
    for key in SETTING_KEYS:
        if key in fields:
            settings.update(validate_settings({key: fields[key]}, limits))
    if "fallbacks" in settings and settings["fallbacks"] != chat.settings.get("fallbacks"):
        own_route = (
            updates.get("endpoint_id", chat.endpoint_id),
            updates.get("model", chat.model),
        )
        settings["fallbacks"] = validate_fallbacks(
            user_id, settings["fallbacks"], own_route=own_route
        )
    if settings.get("workspace") and settings.get("workspace") != chat.settings.get("workspace"):
        # Workspace files and bash act on the server's disk: the admin's (or single user's) only.
        user = db.session.get(User, user_id)
        if user is None or not user.is_admin:
            raise NumiError(
                "admin_only", "Only an administrator can give a chat a workspace directory.", 403
            )
    for name, value in updates.items():
        setattr(chat, name, value)
    chat.settings = settings


def project_ref(user_id: int, value: Any) -> int | None:
    """A chat's `project_id` from input: null (no project) or one of the user's projects;
    anything else is `unknown_project` (404, as for a foreign project)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        found = db.session.execute(
            select(Project.id).where(Project.id == value, Project.user_id == user_id)
        ).scalar_one_or_none()
        if found is not None:
            return found
    raise NumiError("unknown_project", "No such project.", 404)


SETTING_KEYS = (
    "system_prompt",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "tools",
    "workspace",
    "auto_approve",
    "tool_policy",
    "use_documents",
)

# "Use documents" of a chat (and a project's default for its chats): passages of its
# documents go into every request (auto), only when the model calls search_documents (ask),
# or never (numi/knowledge/retrieval.py). Unset: automatically.
USE_DOCUMENTS = ("auto", "ask", "never")


def validate_settings(raw: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    """Check per-chat settings; unknown keys are refused so typos do not pass silently."""
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "system_prompt":
            clean[key] = _text(value or "", "system_prompt", limits["NUMI_MAX_SYSTEM_PROMPT_CHARS"])
        elif key == "temperature":
            clean[key] = _number(value, key, 0.0, 2.0, float)
        elif key == "max_tokens":
            clean[key] = _number(value, key, 1, 1_000_000, int)
        elif key == "reasoning_effort":
            # The default is stored as null: a chat's own settings (PATCHed back, or in its
            # JSON export) must pass again, so null reads as the default too.
            value = "" if value is None else value
            if value not in REASONING_EFFORTS:
                raise invalid(
                    f"reasoning_effort must be one of: {', '.join(e for e in REASONING_EFFORTS if e)}."
                )
            clean[key] = value or None
        elif key == "tools":
            if not isinstance(value, list) or not all(
                isinstance(t, str) and len(t) <= 64 for t in value
            ):
                raise invalid("tools must be a list of tool names.")
            clean[key] = value
        elif key == "fallbacks":
            clean[key] = _fallbacks(value)
        elif key == "tool_policy":
            clean[key] = _tool_policy(value)
        elif key in ("auto_compact", "auto_approve"):
            clean[key] = bool(value)
        elif key == "workspace":
            clean[key] = _workspace(value, limits.get("NUMI_DATA_DIR"))
        elif key == "use_documents":
            if value in (None, ""):  # unset: the project's default, else automatically
                clean[key] = None
                continue
            if value not in USE_DOCUMENTS:
                raise invalid(
                    f"use_documents must be one of: {', '.join(USE_DOCUMENTS)}.",
                    "invalid_use_documents",
                )
            clean[key] = value
        elif key == "left_out_passages":
            clean[key] = _left_out_passages(value)
        else:
            raise invalid(f"Unknown setting {key!r}.", "unknown_setting")
    return clean


MAX_LEFT_OUT_PASSAGES = 200
_PASSAGE_KEY = re.compile(r"\d{1,12}:\d{1,7}")


def _left_out_passages(value: Any) -> list[str]:
    """The document passages a chat leaves out of its requests ("document:chunk", the
    context panel's Leave out; numi/knowledge/retrieval.py)."""
    if (
        not isinstance(value, list)
        or len(value) > MAX_LEFT_OUT_PASSAGES
        or not all(isinstance(k, str) and _PASSAGE_KEY.fullmatch(k) for k in value)
    ):
        raise invalid(
            f'left_out_passages must be a list of at most {MAX_LEFT_OUT_PASSAGES} "document:chunk" keys.',
            "invalid_left_out_passages",
        )
    return list(dict.fromkeys(value))


def _workspace(value: Any, data_dir: str | None = None) -> str | None:
    """A workspace is an existing directory, stored as its real path (symlinks resolved),
    that neither is, lies in, nor contains Numi's data directory."""
    path = _text(value or "", "workspace", 1000).strip()
    if not path:
        return None
    if not os.path.isabs(path):
        raise invalid(
            "The workspace must be an absolute path, like /home/me/project.", "invalid_workspace"
        )
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise invalid("The workspace must be an existing directory.", "invalid_workspace")
    if data_dir and touches_data_dir(real, data_dir):
        raise invalid(
            "The workspace may not be, contain or lie inside Numi's data directory (it holds the "
            "database and the secret key).",
            "workspace_data_dir",
        )
    return real


TOOL_POLICIES = ("ask", "auto")


def _tool_policy(value: Any) -> dict[str, str]:
    """`{tool name: "ask" | "auto"}`: per tool, whether its calls wait for the user
    (agent/approvals.py applies it)."""
    if (
        not isinstance(value, dict)
        or len(value) > 200
        or not all(
            isinstance(name, str) and 0 < len(name) <= 64 and policy in TOOL_POLICIES
            for name, policy in value.items()
        )
    ):
        raise invalid('tool_policy must map tool names to "ask" or "auto".')
    return dict(value)


MAX_FALLBACKS = 10


def _fallbacks(value: Any) -> list[dict[str, Any]]:
    """The shape of a fallback list (`validate_fallbacks` checks the endpoints too)."""
    if not isinstance(value, list):
        raise invalid(
            "fallbacks must be a list of {endpoint_id, model} objects.", "invalid_fallbacks"
        )
    if len(value) > MAX_FALLBACKS:
        raise invalid(f"A chat can have at most {MAX_FALLBACKS} fallbacks.", "too_many_fallbacks")
    out = []
    for item in value:
        if (
            not isinstance(item, dict)
            or set(item) - {"endpoint_id", "model"}
            or not isinstance(item.get("model"), str)
            or not item["model"].strip()
            or len(item["model"]) > 200
        ):
            raise invalid(
                "Each fallback is {endpoint_id, model} with a model name of 1 to 200 characters.",
                "invalid_fallbacks",
            )
        try:
            endpoint_id = int(item.get("endpoint_id"))
        except (TypeError, ValueError):
            raise invalid("Each fallback needs an endpoint_id.", "invalid_fallbacks") from None
        out.append({"endpoint_id": endpoint_id, "model": item["model"].strip()})
    return out


def validate_fallbacks(
    user_id: int, value: Any, *, own_route: tuple[int | None, str | None] | None = None
) -> list[dict[str, Any]]:
    """An ordered fallback chain (chat settings, the Settings page's defaults, a project's
    defaults): at most MAX_FALLBACKS rows of an endpoint the user can use and a model,
    none of them the chat's own route (`own_route`) nor a repeat. Raises before anything is
    written: invalid_fallbacks, too_many_fallbacks, fallback_endpoint_not_found,
    fallback_is_own_route, duplicate_fallback."""
    rows = _fallbacks(value)
    seen: set[tuple[int, str]] = set()
    for row in rows:
        try:
            endpoint_store.get_endpoint(user_id, row["endpoint_id"])
        except NumiError:
            raise invalid(
                f"Fallback endpoint {row['endpoint_id']} does not exist (deleted, or not yours).",
                "fallback_endpoint_not_found",
            ) from None
        key = (row["endpoint_id"], row["model"])
        if own_route is not None and key == own_route:
            raise invalid(
                f"{row['model']} is the chat's own model: a fallback must be another route.",
                "fallback_is_own_route",
            )
        if key in seen:
            raise invalid(f"{row['model']} is in the fallbacks twice.", "duplicate_fallback")
        seen.add(key)
    return rows


def _text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise invalid(f"{name} must be text.")
    if len(value) > limit:
        raise invalid(f"{name} is too long (at most {limit} characters).", "too_long")
    return value


def _number(value: Any, name: str, low: float, high: float, kind: type) -> Any:
    if value in (None, ""):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise invalid(f"{name} must be a number.") from None
    if not low <= number <= high:
        raise invalid(f"{name} must be between {low} and {high}.")
    return number


def list_messages(chat: Chat, *, limit: int, before_id: int | None = None) -> Page:
    """The newest `limit` live messages before `before_id`, returned oldest first.

    The cursor is the id of the oldest message returned; pass it as `before_id` to load
    the page above it.
    """
    stmt = select(Message).where(Message.chat_id == chat.id, Message.shown())
    if before_id is not None:
        stmt = stmt.where(Message.id < before_id)
    rows = list(db.session.execute(stmt.order_by(Message.id.desc()).limit(limit + 1)).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    rows.reverse()
    return Page(rows, str(rows[0].id) if more and rows else None)


def list_messages_around(chat: Chat, message_id: int, *, limit: int) -> tuple[Page, bool]:
    """A page of live messages that ends a little after `message_id` (a search hit or an
    outline entry), so the page can open on it. Returns the page (its cursor loads older
    messages as usual) and whether newer messages exist beyond it."""
    after = max(1, limit // 5)
    newer = list(
        db.session.execute(
            select(Message)
            .where(Message.chat_id == chat.id, Message.shown(), Message.id > message_id)
            .order_by(Message.id)
            .limit(after + 1)
        ).scalars()
    )
    has_newer = len(newer) > after
    newer = newer[:after]
    page = list_messages(chat, limit=limit - len(newer), before_id=message_id + 1)
    return Page(page.items + newer, page.next_cursor), has_newer


def touch(chat: Chat) -> None:
    """Move the chat to the top of the sidebar (caller commits)."""
    chat.updated_at = utcnow()
