"""A mirrored chat's attachments: their bytes copied beside its Markdown file.

Each chat file `<name>.md` of the Markdown mirror (numi/chat/markdown_mirror.py) has its
attachments in the folder `<name>.files/` next to it, which the file links to, so the
folder reads complete in an editor without Numi (issue 42). A name in that folder comes
from the uploader's file name, made safe: no path separator or `..` (nothing lands outside
the folder), no leading dot (nothing hidden), no control, invisible or direction-changing
character (what the name shows is what it is), no name Windows reserves, and unique in
the folder even where case does not count. The folder follows its chat: its files are
copied when missing or different, moved to `.trash/` when the chat no longer shows them,
renamed with the chat's file and trashed with it. Writes go through a temporary file and
a rename, like the chat files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

FILES_SUFFIX = ".files"
# Deleted chats' files go here, inside the mirror: a deletion in Numi never loses a file.
TRASH = ".trash"
_TEMPORARY_PREFIX = ".numi-"
_LONGEST_STEM = 100
_LONGEST_EXTENSION = 16
# Names Windows will not open as files, whatever the extension (a mirror folder may be a
# synced vault read on Windows).
_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{d}{n}" for d in ("COM", "LPT") for n in range(10)}


@dataclass(frozen=True)
class AttachedFile:
    """One attachment of a mirrored chat: its safe name in the chat's folder, where its
    bytes are stored, and their size and SHA-256 (to tell a copy that is up to date)."""

    attachment_id: int
    name: str
    source: Path
    size: int
    sha256: str


def files_dir(chat_file: Path) -> Path:
    """The folder of a chat file's attachments: `<name>.files` beside `<name>.md`."""
    return chat_file.with_name(chat_file.stem + FILES_SUFFIX)


def link(chat_file: Path, attached: AttachedFile, label: str) -> str:
    """The Markdown link from the chat's file to its copy of an attachment."""
    target = f"{quote(files_dir(chat_file).name)}/{quote(attached.name)}"
    return f"[{_link_text(label)}]({target})"


def safe_name(filename: str, attachment_id: int) -> str:
    """A file name that is safe in any folder and shows what it is (see the docstring)."""
    name = unicodedata.normalize("NFKC", filename or "")
    # Letters and digits of any script stay; separators, controls, format characters
    # (zero-width, bidi overrides) and every other symbol become a space.
    name = "".join(c if (c.isalnum() or c in " ._-()+,") else " " for c in name)
    name = re.sub(r"\s+", " ", name).strip(" ._-")
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    stem = stem[:_LONGEST_STEM].rstrip(" .")
    extension = extension[:_LONGEST_EXTENSION].strip(" ")
    if not stem or stem.split(".")[0].upper() in _RESERVED:
        stem = f"file-{attachment_id}" + (f" {stem}" if stem else "")
    return f"{stem}.{extension}" if extension else stem


def unique_names(named: Iterable[tuple[int, str]]) -> dict[int, str]:
    """Attachment id -> its safe name, unique among them where case does not count (the
    later of two alike names gets its id added)."""
    names: dict[int, str] = {}
    taken: set[str] = set()
    for attachment_id, filename in named:
        if attachment_id in names:
            continue
        name = safe_name(filename, attachment_id)
        if name.casefold() in taken:
            stem, dot, extension = name.rpartition(".")
            name = f"{stem}-{attachment_id}.{extension}" if dot else f"{name}-{attachment_id}"
        taken.add(name.casefold())
        names[attachment_id] = name
    return names


def place(chat_file: Path, attached: tuple[AttachedFile, ...], folder: Path) -> None:
    """Bring the chat's attachment folder up to date: copy what is missing or differs, move
    what the chat no longer shows to `folder/.trash/`; no folder for a chat without files."""
    directory = files_dir(chat_file)
    wanted = {file.name: file for file in attached}
    if directory.is_dir():
        for existing in directory.iterdir():
            if existing.is_file() and existing.name not in wanted:
                to_trash(folder, existing, directory.name)
    if not wanted:
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
        return
    directory.mkdir(parents=True, exist_ok=True)
    for file in attached:
        target = directory / file.name
        if not file.source.is_file() or _same(target, file):
            continue  # a stored file gone missing is left out, not an error
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=_TEMPORARY_PREFIX)
        os.close(handle)
        try:
            shutil.copyfile(file.source, temporary)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def move_with(earlier: Path, target: Path) -> None:
    """A renamed or moved chat file takes its attachment folder along."""
    old, new = files_dir(earlier), files_dir(target)
    if old.is_dir() and not new.exists():
        new.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, new)


def to_trash(folder: Path, path: Path, under: str = "") -> Path:
    """Move `path` (a file or a chat's attachment folder) into `folder/.trash/[under/]`,
    under a name nothing there has yet."""
    trash_dir = folder / TRASH / under if under else folder / TRASH
    trash_dir.mkdir(parents=True, exist_ok=True)
    target, n = trash_dir / path.name, 1
    while target.exists():
        n += 1
        stem, suffix = (path.stem, path.suffix) if path.is_file() else (path.name, "")
        target = trash_dir / f"{stem} ({n}){suffix}"
    os.replace(path, target)
    return target


def is_inside_files_dir(path: Path, folder: Path) -> bool:
    """Whether `path` lies in a chat's attachment folder (an attached `.md` is no chat file)."""
    for parent in path.relative_to(folder).parents:
        if parent.name.endswith(FILES_SUFFIX):
            chat_file = folder / parent.with_name(parent.name[: -len(FILES_SUFFIX)] + ".md")
            if chat_file.is_file():
                return True
    return False


def _same(target: Path, file: AttachedFile) -> bool:
    try:
        if target.stat().st_size != file.size:
            return False
    except FileNotFoundError:
        return False
    digest = hashlib.sha256()
    with target.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest() == file.sha256


def _link_text(label: str) -> str:
    # A bracket in the uploader's name would end the link's text early.
    return label.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
