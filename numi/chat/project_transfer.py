"""A project exported and imported whole: `numi.project` version 1.

The document holds the project (name, instructions, defaults), its memories, its files
(bytes in base64, so the file is complete on another server) and its chats, each a
`numi.chat` document as a single chat's JSON export writes it. Import checks everything
first (the project's fields, every file's size and type, every chat: `read_project`, in the
import's subprocess), then the import job writes its chats hidden and creates the project
with all of it in its last transaction (`create_project`), or nothing; the POST /api/import
route recognises the format (numi/web/import_runner.py).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from ..errors import NumiError, invalid
from ..extensions import db
from ..models import Memory, Project, ProjectFile, utcnow
from . import attachments as attachment_store, memories as memory_store
from .chats import get_chat
from .export import attachment_index, chat_document, load_transcript
from .projects import (
    clean_instructions,
    clean_name,
    clean_settings,
    get_project,
    project_chats,
    project_files,
)
from ..lazy_modules import lazy_module

# The chat importers (every format's reader) are loaded by the first project import.
if TYPE_CHECKING:
    from . import importer
else:
    importer = lazy_module("numi.chat.importer")

FORMAT_TAG = "numi.project"
FORMAT_VERSION = 1
MAX_CHATS = 1000  # exported; an import is capped by NUMI_IMPORT_MAX_CHATS


def export_project(user_id: int, project_id: int, data_dir: str) -> dict[str, Any]:
    """The user's project as a `numi.project` document (404 for a foreign one)."""
    project = get_project(user_id, project_id)
    files = []
    for attachment in project_files(user_id, project.id):
        path = attachment_store.file_path(data_dir, attachment)
        if path.is_file():
            files.append(
                {
                    "filename": attachment.filename,
                    "mime": attachment.mime,
                    "content_base64": base64.b64encode(path.read_bytes()).decode("ascii"),
                }
            )
    chats = []
    for chat in project_chats(user_id, project.id, limit=MAX_CHATS):
        messages = load_transcript(get_chat(user_id, chat.id), every_version=True)
        chats.append(chat_document(chat, messages, attachment_index(user_id, messages)))
    return {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "project": {
            "name": project.name,
            "instructions": project.instructions or "",
            # Endpoints are this server's: a route or an embedding endpoint is not exported.
            "settings": {
                k: v
                for k, v in project.settings.items()
                if k != "endpoint_id" and not (k == "embedding" and isinstance(v, dict))
            },
        },
        "memories": [
            {"text": m.text} for m in memory_store.list_memories(user_id, project_id=project.id)
        ],
        "files": files,
        "chats": chats,
    }


def is_project_document(document: Any) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT_TAG


def read_project(document: dict[str, Any], config: dict[str, Any]) -> tuple[dict[str, Any], list]:
    """Check a `numi.project` document without the database (in the import's subprocess):
    its fields, memories, files and chats. Returns the project's part for the writer
    (`project`, `memories`, `files`) and its chats as `ImportedChat`s."""
    if document.get("version") != FORMAT_VERSION:
        raise _bad(f"this Numi reads {FORMAT_TAG} version {FORMAT_VERSION}")
    raw = document.get("project")
    if not isinstance(raw, dict):
        raise _bad("project is missing")
    settings = raw.get("settings") or {}
    if not isinstance(settings, dict):
        raise _bad("project.settings must be an object")
    try:
        project = {
            "name": clean_name(raw.get("name"), config),
            "instructions": clean_instructions(raw.get("instructions"), config),
            # Imported defaults never turn tools, a workspace or auto-approval on (as chats).
            "settings": {k: v for k, v in settings.items() if k not in importer.DROPPED_SETTINGS},
        }
        texts = [
            memory_store.clean_text(m.get("text") if isinstance(m, dict) else None, config)
            for m in _list(document, "memories")
        ]
    except NumiError as error:
        raise _bad(error.message) from None
    for index, item in enumerate(_list(document, "files")):
        _file(item, index, config)
    chats = []
    for item in _list(document, "chats"):
        chats += importer.detect_format(item).parse(item, config)
    files = [
        {k: item.get(k) for k in ("filename", "mime", "content_base64")}
        for item in document.get("files", [])
    ]
    return {"project": project, "memories": list(dict.fromkeys(texts)), "files": files}, chats


def check_project(user_id: int, head: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The checks of a read project that need the database (its default endpoint is one the
    user can use, its memories fit), before any of its chats is written. Returns its
    cleaned settings."""
    try:
        settings = clean_settings(user_id, head["project"]["settings"], config)
    except NumiError as error:
        raise _bad(error.message) from None
    memory_store._check_room(user_id, config, len(head["memories"]))
    return settings


def create_project(
    user_id: int, head: dict[str, Any], settings: dict[str, Any], config: dict[str, Any]
) -> tuple[Project, list[int]]:
    """Store a read project's files and add the project with its memories to the session
    (the caller moves its chats in and commits). Returns it and its files' attachment ids
    (for the caller to index)."""
    stored = []
    for index, item in enumerate(head["files"]):
        name, mime, data = _file(item, index, config)
        stored.append(attachment_store.store_upload(config, user_id, name, mime, data))
    fields = head["project"]
    project = Project(
        user_id=user_id, name=fields["name"], instructions=fields["instructions"] or None
    )
    project.settings = settings
    db.session.add(project)
    db.session.flush()
    for attachment in stored:
        row = db.session.get(ProjectFile, attachment.id)
        if row is None:
            db.session.add(
                ProjectFile(attachment_id=attachment.id, project_id=project.id, user_id=user_id)
            )
        else:
            row.project_id = project.id
    for text in head["memories"]:
        db.session.add(Memory(user_id=user_id, project_id=project.id, text=text))
    project.updated_at = utcnow()
    return project, [attachment.id for attachment in stored]


def _list(document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key, [])
    if not isinstance(value, list):
        raise _bad(f"{key} must be a list")
    return value


def _file(item: Any, index: int, config: dict[str, Any]) -> tuple[str, str | None, bytes]:
    if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
        raise _bad(f"files[{index}] needs a filename")
    try:
        data = base64.b64decode(item.get("content_base64") or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise _bad(f"files[{index}] is not base64") from None
    if not data or len(data) > config["NUMI_UPLOAD_MAX_BYTES"]:
        raise _bad(f"files[{index}] is empty or larger than the upload limit")
    mime = item.get("mime") if isinstance(item.get("mime"), str) else None
    detected = attachment_store.detect_type(item["filename"], mime, data)
    if not attachment_store.type_allowed(detected, config["NUMI_UPLOAD_TYPES"]):
        raise _bad(f"files[{index}] has a type that cannot be attached ({detected})")
    return item["filename"], mime, data


def _bad(reason: str) -> NumiError:
    return invalid(f"This project file cannot be imported: {reason}.", "invalid_import")
