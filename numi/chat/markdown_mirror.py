"""The Markdown mirror: every chat of a user as one readable `.md` file in a folder.

`numi export --markdown DIR` writes it once (numi/cli/export.py). Each file has YAML front
matter (the chat's id, title, model, project, tags and dates, and the `generated_by: numi`
marker), then the shown branch with a heading per message, reasoning folded in
`<details>` and tool calls as fenced blocks. Files are named `<title>-<id prefix>.md`, in a
subfolder per project: a second export finds each chat's file again by the id in its front
matter, rewrites it in place when the chat changed (and not at all when it did not), and
renames it when the chat was renamed or moved. A file without the marker is never
overwritten. Every write goes to a temporary file beside the target, then is renamed over
it: an interrupted export leaves each file whole, old or new.

The live mirror (numi/chat/live_mirror.py) uses the same two halves apart: `chat_files`
reads the database, `write_files` touches only files (so it can run off the hub) and moves a
deleted chat's file into `.trash/` inside the folder. A chat's attachments are copied into
`<name>.files/` beside its file and linked from it (numi/chat/mirror_files.py).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from collections.abc import Collection, Iterable
from pathlib import Path

from flask import current_app
from sqlalchemy import select

from . import mirror_files
from ..extensions import db
from ..models import Attachment, Chat, Project
from .attachments import file_path
from .export import (
    ExportMessage,
    attachment_index,
    export_filename,
    human_size,
    load_transcript,
    message_markdown,
    message_views,
)
from .mirror_files import AttachedFile

MARKER = "generated_by: numi"
TRASH = mirror_files.TRASH
# Front matter is read from the head of each file only: an id sits in its first lines.
_HEAD_BYTES = 4096


@dataclass
class MirrorResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    renamed: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    trashed: list[tuple[Path, Path]] = field(default_factory=list)


@dataclass(frozen=True)
class ChatFile:
    """One chat's file as it should be: where (relative to the folder), what, and the
    attachments copied beside it (numi/chat/mirror_files.py)."""

    chat_id: str
    path: Path
    body: str
    attachments: tuple[AttachedFile, ...] = ()


def mirror_user(user_id: int, folder: Path) -> MirrorResult:
    """Write every live chat of `user_id` into `folder` (see the module docstring)."""
    return write_files(folder, chat_files(user_id, live_chat_ids(user_id)))


def live_chat_ids(user_id: int) -> list[str]:
    """The user's chats that have a file in the mirror: live and not temporary, oldest first."""
    return list(
        db.session.execute(
            select(Chat.id)
            .where(Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.temporary.is_(False))
            .order_by(Chat.created_at, Chat.id)
        ).scalars()
    )


def chat_files(user_id: int, chat_ids: Collection[str]) -> list[ChatFile]:
    """The files of the user's live chats among `chat_ids` (the database part of a mirror:
    the caller may write them elsewhere, off the hub); another user's chat is left out."""
    if not chat_ids:
        return []
    projects = {
        p.id: p.name
        for p in db.session.execute(select(Project).where(Project.user_id == user_id)).scalars()
    }
    chats = db.session.execute(
        select(Chat)
        .where(
            Chat.user_id == user_id,
            Chat.id.in_(list(chat_ids)),
            Chat.deleted_at.is_(None),
            Chat.temporary.is_(False),
        )
        .order_by(Chat.created_at, Chat.id)
    ).scalars()
    data_dir = Path(current_app.config["NUMI_DATA_DIR"])
    files = []
    for chat in chats:
        project = projects.get(chat.project_id) if chat.project_id else None
        subfolder = Path(_stem(project)) if project else Path()
        path = subfolder / f"{_stem(chat.title)}-{chat.id[:8]}.md"
        messages = load_transcript(chat)
        index = attachment_index(user_id, messages)
        views = message_views(messages, index)
        attached = _attached(views, index, data_dir)
        links = {
            file.attachment_id: mirror_files.link(
                path, file, f"{file.name} ({human_size(file.size)})"
            )
            for file in attached
        }
        body = chat_markdown(chat, views, project, links)
        files.append(ChatFile(chat.id, path, body, attached))
    return files


def _attached(
    views: list[ExportMessage], index: dict[int, Attachment], data_dir: Path
) -> tuple[AttachedFile, ...]:
    """The attachments the shown branch names, in order, each under its safe name."""
    shown = [i for view in views for i in view.attachment_ids if i is not None and i in index]
    names = mirror_files.unique_names((i, index[i].filename) for i in shown)
    return tuple(
        AttachedFile(
            attachment_id=i,
            name=name,
            source=file_path(str(data_dir), index[i]),
            size=index[i].size,
            sha256=index[i].sha256,
        )
        for i, name in names.items()
    )


def write_files(
    folder: Path,
    files: Iterable[ChatFile],
    trash: Collection[str] = (),
    known: dict[str, Path] | None = None,
) -> MirrorResult:
    """Put each of `files` in `folder` and move the files of the chats in `trash` to
    `folder/.trash/` (the file part of a mirror: no database). `known` is the folder's
    `mirrored_files`, kept up to date here, when the caller already read it."""
    folder.mkdir(parents=True, exist_ok=True)
    if known is None:
        known = mirrored_files(folder)
    result = MirrorResult()
    for file in files:
        if _place(file.chat_id, folder / file.path, file.body, known, result):
            mirror_files.place(folder / file.path, file.attachments, folder)
    for chat_id in trash:
        earlier = known.pop(chat_id, None)
        if earlier is not None and earlier.exists():
            result.trashed.append((earlier, mirror_files.to_trash(folder, earlier)))
            if mirror_files.files_dir(earlier).is_dir():
                mirror_files.to_trash(folder, mirror_files.files_dir(earlier))
    return result


def chat_markdown(
    chat: Chat,
    views: list[ExportMessage],
    project: str | None,
    links: dict[int, str] | None = None,
) -> str:
    """One chat's file: front matter, then the shown branch (`links`: an attachment's
    Markdown link to its copy, by id, in place of its reference line)."""
    front = {
        "id": chat.id,
        "title": chat.title,
        "model": chat.model,
        "project": project,
        "tags": chat.tags,
        "created": _iso(chat.created_at),
        "updated": _iso(chat.updated_at),
    }
    # JSON scalars and lists are YAML flow values: titles with colons or quotes stay one value.
    out = [
        "---",
        *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()),
    ]
    out += [MARKER, "---", "", f"# {_one_line(chat.title)}", ""]
    if chat.settings.get("system_prompt"):
        out += [
            "> **System prompt**",
            ">",
            *(f"> {line}" for line in chat.settings["system_prompt"].splitlines()),
            "",
        ]
    for view in views:
        out += message_markdown(view, mirrored=True, links=links)
    return "\n".join(out).rstrip() + "\n"


def _place(
    chat_id: str, target: Path, body: str, known: dict[str, Path], result: MirrorResult
) -> bool:
    """Write `body` to `target`, moving the chat's earlier file (and its attachments'
    folder) there first; never over a file Numi did not write (or wrote for another chat).
    Whether `target` is the chat's file now."""
    earlier = known.get(chat_id)
    if target.exists() and target != earlier:
        result.skipped.append((target, "a file there was not written by Numi for this chat"))
        return False
    if earlier is not None and earlier != target:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(earlier, target)
        mirror_files.move_with(earlier, target)
        known[chat_id] = target
        result.renamed.append((earlier, target))
    elif target.exists() and target.read_text(encoding="utf-8") == body:
        result.unchanged.append(target)
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".numi-", suffix=".md.tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(body)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    known[chat_id] = target
    result.written.append(target)
    return True


def mirrored_files(folder: Path) -> dict[str, Path]:
    """Chat id -> the file Numi wrote for it in `folder`, from each file's front matter."""
    found: dict[str, Path] = {}
    for path in folder.rglob("*.md"):
        if TRASH in path.relative_to(folder).parts or not path.is_file():
            continue
        if mirror_files.is_inside_files_dir(path, folder):
            continue  # an attached .md, not a chat's file
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES).decode("utf-8", "replace")
        lines = head.split("\n")
        if not lines or lines[0] != "---" or MARKER not in lines:
            continue
        for line in lines[1 : lines.index(MARKER)]:
            if line.startswith("id: "):
                try:
                    chat_id = json.loads(line[4:])
                except ValueError:
                    break
                if isinstance(chat_id, str):
                    found[chat_id] = path
                break
    return found


def _stem(name: str) -> str:
    return export_filename(name, "md")[: -len(".md")]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _iso(value) -> str | None:
    return value.isoformat() + "Z" if value else None
