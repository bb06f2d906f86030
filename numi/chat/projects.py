"""Projects: a user's folders of chats, with instructions, defaults for new chats and files.

Every function takes the owner's user id; another user's project is `NotFound` (404), as if
it did not exist. Validation happens before anything is written and fails with a stable code:

- `invalid_project_name`: empty, or over `NUMI_MAX_PROJECT_NAME_CHARS`;
- `invalid_instructions`: not text, or over `NUMI_MAX_PROJECT_INSTRUCTIONS_CHARS`;
- `settings`: the same keys as a chat's settings, checked by the same cleaner
  (`chats.validate_settings`, fallbacks by `chats.validate_fallbacks`), plus
  `endpoint_id` and `model` (the new chat's route), and `embedding` (the project's own
  embedding model for its files and its chats' questions, `chat/embedding_choice.py`:
  `invalid_project_embedding`); empty values are not stored;
- `invalid_delete_mode`: deleting a project keeps its chats (they leave the project) or
  deletes them with it, and says which.

A chat names its project in `chats.project_id` (at most one); `chats.py` checks the id a
chat is given (`unknown_project`) and gives a new chat in a project its defaults.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select, update

from .. import endpoints as endpoint_store
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import (
    Attachment,
    Chat,
    Memory,
    Project,
    ProjectFile,
    QueuedMessage,
    User,
    get_owned,
    utcnow,
)
from .attachments import get_attachment
from .chats import validate_fallbacks, validate_settings
from .embedding_choice import validate_choice as validate_embedding

DELETE_MODES = ("keep", "delete")
ROUTE_KEYS = ("endpoint_id", "model")
PROJECT_ONLY_KEYS = ("fallbacks", "embedding")  # the project's own: never copied into a chat


def get_project(user_id: int, project_id: Any) -> Project:
    """The user's project `project_id`, or NotFound."""
    return get_owned(Project, project_id, user_id, "project")


def chosen_project(user_id: int, value: Any) -> Project:
    """The project a request names by id: `unknown_project` (404) unless it is the user's."""
    try:
        return get_project(user_id, value)
    except NotFound:
        raise NumiError("unknown_project", "No such project.", 404) from None


def list_projects(user_id: int) -> list[Project]:
    """The user's projects by name (the sidebar's order)."""
    return list(
        db.session.execute(
            select(Project).where(Project.user_id == user_id).order_by(Project.name, Project.id)
        ).scalars()
    )


def chat_counts(user_id: int) -> dict[int, int]:
    """Live chats per project of the user (one grouped query)."""
    rows = db.session.execute(
        select(Chat.project_id, func.count())
        .where(Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.project_id.is_not(None))
        .group_by(Chat.project_id)
    )
    return {project_id: count for project_id, count in rows}


def create_project(user_id: int, fields: dict[str, Any], limits: dict[str, Any]) -> Project:
    """A new project from user input (`name`, `instructions?`, `settings?`)."""
    if "name" not in fields:
        raise invalid("A project needs a name.", "invalid_project_name")
    project = Project(user_id=user_id)
    _apply(project, user_id, fields, limits)
    db.session.add(project)
    db.session.commit()
    return project


def update_project(
    user_id: int, project_id: int, fields: dict[str, Any], limits: dict[str, Any]
) -> Project:
    """Apply a partial update; a bad field changes nothing."""
    project = get_project(user_id, project_id)
    _apply(project, user_id, fields, limits)
    db.session.commit()
    return project


def delete_project(user_id: int, project_id: int, chats: Any) -> int:
    """Delete the project, its memories and its files' ownership. `chats` "keep": its chats
    stay and leave the project; "delete": they are deleted too. Returns how many chats
    were deleted."""
    project = get_project(user_id, project_id)  # a foreign project is a 404 first
    if chats not in DELETE_MODES:
        raise invalid(
            'Say what becomes of the project\'s chats: chats="keep" or chats="delete".',
            "invalid_delete_mode",
        )
    deleted = 0
    in_project = (Chat.user_id == user_id, Chat.project_id == project.id)
    if chats == "delete":
        ids = list(
            db.session.execute(
                select(Chat.id).where(*in_project, Chat.deleted_at.is_(None))
            ).scalars()
        )
        deleted = len(ids)
        if ids:
            db.session.execute(delete(QueuedMessage).where(QueuedMessage.chat_id.in_(ids)))
            db.session.execute(update(Chat).where(Chat.id.in_(ids)).values(deleted_at=utcnow()))
    db.session.execute(update(Chat).where(*in_project).values(project_id=None))
    db.session.execute(delete(Memory).where(Memory.project_id == project.id))
    db.session.execute(delete(ProjectFile).where(ProjectFile.project_id == project.id))
    db.session.delete(project)
    db.session.commit()
    return deleted


def project_chats(user_id: int, project_id: int, limit: int = 200) -> list[Chat]:
    """The project's live chats, newest activity first."""
    return list(
        db.session.execute(
            select(Chat)
            .where(
                Chat.user_id == user_id, Chat.project_id == project_id, Chat.deleted_at.is_(None)
            )
            .order_by(Chat.updated_at.desc(), Chat.id.desc())
            .limit(limit)
        ).scalars()
    )


def new_chat_fields(project: Project, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a new chat in `project`: its defaults, under what was given."""
    defaults = project.settings
    merged = {key: defaults[key] for key in ROUTE_KEYS if defaults.get(key) is not None}
    if "endpoint_id" in merged:
        try:  # an endpoint removed since: the user's usual default answers instead
            endpoint_store.get_endpoint(project.user_id, merged["endpoint_id"])
        except NotFound:
            merged.pop("endpoint_id")
            merged.pop("model", None)
    merged.update(fields)
    # The project's fallbacks stay the project's: a chat without its own chain uses them at
    # each turn (agent/routes.py), so a later edit of the project's chain reaches it too.
    # The project's embedding model is the project's: its chats' questions use it through
    # their project (knowledge/retrieval.py).
    settings = {
        k: v for k, v in defaults.items() if k not in ROUTE_KEYS and k not in PROJECT_ONLY_KEYS
    }
    if isinstance(fields.get("settings"), dict):
        settings.update(fields["settings"])
    if settings:
        merged["settings"] = settings
    merged["project_id"] = project.id
    return merged


# --- files ---------------------------------------------------------------------------------


def add_file(user_id: int, project_id: int, attachment_id: Any) -> Attachment:
    """Make the user's attachment one of the project's files (again: no change)."""
    project = get_project(user_id, project_id)
    if not isinstance(attachment_id, int) or isinstance(attachment_id, bool):
        raise invalid("attachment_id must be the id of one of your uploads.", "attachment_missing")
    try:
        attachment = get_attachment(user_id, attachment_id)
    except NotFound:
        raise NumiError("attachment_missing", "No such attachment.", 404) from None
    if db.session.get(ProjectFile, attachment.id) is None:
        db.session.add(
            ProjectFile(attachment_id=attachment.id, project_id=project.id, user_id=user_id)
        )
    else:
        db.session.execute(
            update(ProjectFile)
            .where(ProjectFile.attachment_id == attachment.id, ProjectFile.user_id == user_id)
            .values(project_id=project.id)
        )
    project.updated_at = utcnow()
    db.session.commit()
    return attachment


def project_files(user_id: int, project_id: int) -> list[Attachment]:
    """The project's files, oldest first."""
    return list(
        db.session.execute(
            select(Attachment)
            .join(ProjectFile, ProjectFile.attachment_id == Attachment.id)
            .where(
                ProjectFile.project_id == project_id,
                ProjectFile.user_id == user_id,
                Attachment.user_id == user_id,
            )
            .order_by(ProjectFile.created_at, Attachment.id)
        ).scalars()
    )


def project_file_ids(user_id: int, project_id: int | None) -> list[int]:
    """Ids of the project's files (none without a project)."""
    if project_id is None:
        return []
    return list(
        db.session.execute(
            select(ProjectFile.attachment_id).where(
                ProjectFile.project_id == project_id, ProjectFile.user_id == user_id
            )
        ).scalars()
    )


def remove_file(user_id: int, project_id: int, attachment_id: int) -> None:
    """The attachment stops being one of the project's files (the upload stays)."""
    project = get_project(user_id, project_id)
    removed = db.session.execute(
        delete(ProjectFile).where(
            ProjectFile.project_id == project.id,
            ProjectFile.attachment_id == attachment_id,
            ProjectFile.user_id == user_id,
        )
    ).rowcount
    if not removed:
        raise NotFound("file")
    db.session.commit()


# --- validation ----------------------------------------------------------------------------


def _apply(project: Project, user_id: int, fields: dict[str, Any], limits: dict[str, Any]) -> None:
    updates: dict[str, Any] = {}
    if "name" in fields:
        updates["name"] = clean_name(fields["name"], limits)
    if "instructions" in fields:
        updates["instructions"] = clean_instructions(fields["instructions"], limits) or None
    if "settings" in fields:
        updates["settings"] = clean_settings(user_id, fields["settings"], limits)
    for name, value in updates.items():
        setattr(project, name, value)


def clean_name(value: Any, limits: dict[str, Any]) -> str:
    limit = limits["NUMI_MAX_PROJECT_NAME_CHARS"]
    name = value.strip() if isinstance(value, str) else ""
    if not name or len(name) > limit:
        raise invalid(f"A project name is 1 to {limit} characters of text.", "invalid_project_name")
    return name


def clean_instructions(value: Any, limits: dict[str, Any]) -> str:
    limit = limits["NUMI_MAX_PROJECT_INSTRUCTIONS_CHARS"]
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise invalid(
            f"Project instructions are text of at most {limit} characters.",
            "invalid_instructions",
        )
    return value.strip()


def clean_settings(user_id: int, value: Any, limits: dict[str, Any]) -> dict[str, Any]:
    """A project's defaults: chat settings (the chat cleaner), `endpoint_id` and `model`,
    and its own `embedding` model."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("settings must be an object.")
    raw = dict(value)
    route: dict[str, Any] = {}
    endpoint_id = raw.pop("endpoint_id", None)
    if endpoint_id not in (None, ""):
        try:
            endpoint_id = int(endpoint_id)
        except (TypeError, ValueError):
            raise invalid("endpoint_id must be a number.") from None
        route["endpoint_id"] = endpoint_store.get_endpoint(user_id, endpoint_id).id
    model = raw.pop("model", None)
    if model not in (None, ""):
        if not isinstance(model, str) or len(model) > 200:
            raise invalid("model must be a model id (at most 200 characters).")
        route["model"] = model.strip()
    own: dict[str, Any] = {}
    embedding = raw.pop("embedding", None)
    if embedding not in (None, ""):  # unset: the user's model of Settings → Documents
        try:
            own["embedding"] = validate_embedding(user_id, embedding)
        except NumiError as error:
            if error.code != "invalid_documents_settings":
                raise  # an endpoint the user cannot see: not_found
            raise NumiError("invalid_project_embedding", error.message, 400) from None
    clean = {
        k: v
        for k, v in validate_settings(raw, limits).items()
        if v not in (None, "", [], {}) and not (k == "auto_approve" and v is False)
    }
    if clean.get("fallbacks"):  # the chat's checks: endpoints the user can use, no repeats
        own_route = (route["endpoint_id"], route.get("model")) if "endpoint_id" in route else None
        clean["fallbacks"] = validate_fallbacks(user_id, clean["fallbacks"], own_route=own_route)
    if clean.get("workspace"):
        user = db.session.get(User, user_id)
        if user is None or not user.is_admin:
            raise NumiError(
                "admin_only", "Only an administrator can give a chat a workspace directory.", 403
            )
    return {**route, **own, **clean}
