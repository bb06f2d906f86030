"""A project exported and imported whole: `numi.project` version 1.

The document holds the project (name, instructions, defaults), its memories, its files
(bytes in base64, so the file is complete on another server) and its chats, each a
`numi.chat` document as a single chat's JSON export writes it. Import checks everything
first (the project's fields, every file's size and type, every chat) and then creates a
new project with all of it, or nothing; the POST /api/import route recognises the format.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..errors import NumiError, invalid
from ..extensions import db
from ..models import Memory, Project, ProjectFile, utcnow
from . import attachments as attachment_store, importer, memories as memory_store
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

FORMAT_TAG = "numi.project"
FORMAT_VERSION = 1
MAX_CHATS = 1000


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
            "settings": {k: v for k, v in project.settings.items() if k != "endpoint_id"},
        },
        "memories": [
            {"text": m.text} for m in memory_store.list_memories(user_id, project_id=project.id)
        ],
        "files": files,
        "chats": chats,
    }


def is_project_document(document: Any) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT_TAG


def import_project(
    user_id: int, document: dict[str, Any], config: dict[str, Any]
) -> tuple[Project, list[int]]:
    """A new project from a `numi.project` document: all of it, or nothing. Returns it and
    its files' attachment ids (for the caller to index)."""
    if document.get("version") != FORMAT_VERSION:
        raise _bad(f"this Numi reads {FORMAT_TAG} version {FORMAT_VERSION}")
    raw = document.get("project")
    if not isinstance(raw, dict):
        raise _bad("project is missing")
    try:
        name = clean_name(raw.get("name"), config)
        instructions = clean_instructions(raw.get("instructions"), config)
        # Imported defaults never turn tools, a workspace or auto-approval on (as chats).
        settings = {
            k: v
            for k, v in (raw.get("settings") or {}).items()
            if k not in importer.DROPPED_SETTINGS
        }
        settings = clean_settings(user_id, settings, config)
        texts = [
            memory_store.clean_text(m.get("text"), config) for m in _list(document, "memories")
        ]
    except NumiError as error:
        raise _bad(error.message) from None
    files = [_file(item, index, config) for index, item in enumerate(_list(document, "files"))]
    chat_documents = _list(document, "chats")
    if len(chat_documents) > MAX_CHATS:
        raise _bad(f"at most {MAX_CHATS} chats")
    parsed = []
    for item in chat_documents:
        imported = importer.detect_format(item).parse(item, config)
        importer._check_sizes(imported, config["NUMI_MAX_MESSAGE_CHARS"])
        parsed += imported
    memory_store._check_room(user_id, config, len(set(texts)))
    stored = [
        attachment_store.store_upload(config, user_id, name_, mime, data)
        for name_, mime, data in files
    ]
    try:
        project = Project(user_id=user_id, name=name, instructions=instructions or None)
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
        for text in dict.fromkeys(texts):
            db.session.add(Memory(user_id=user_id, project_id=project.id, text=text))
        for item in parsed:
            chat = importer._store(user_id, item)
            chat.project_id = project.id
        project.updated_at = utcnow()
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
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
