"""Attachments: uploaded files, stored once by content hash, owned by the uploader.

Files live under ``<NUMI_DATA_DIR>/uploads/<sha[:2]>/<sha>``; the `attachments` row holds
the name, type, size, hash and (for text, code, PDF and DOCX files) the extracted text. A message
refers to its files by id in ``content_parts_json`` (``{"type": "attachment", "id": N}``);
the bytes a model sees are rebuilt at request time by `model_parts()`, so no image data
or data URL ever reaches the messages table.

`owned_attachments()` is the one ownership check: a send, and any transcript edit that
would delete rows, calls it before anything changes.
"""

from __future__ import annotations

import hashlib
import io
import logging
import mimetypes
import os
from pathlib import Path
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from ..cpu_pool import run_cpu
from ..errors import NumiError, invalid
from ..extensions import db
from ..models import Attachment, Chat, Checkpoint, get_owned
from .docx_extract import DOCX_MIME, docx_text
from .pdf_extract import ENCRYPTED, PdfLimits, extract

log = logging.getLogger(__name__)

MAX_PER_MESSAGE = 20
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# Rough token cost of one image part, for budgets (providers charge ~1-1.6k per image).
IMAGE_CHARS_ESTIMATE = 4000
THUMBNAIL_SIDE = 160

# Code and markup files that browsers label oddly (or not at all) but are plain text.
TEXT_EXTENSIONS = {
    ".txt",
    ".md",
    ".markdown",
    ".rst",
    ".csv",
    ".tsv",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".conf",
    ".xml",
    ".html",
    ".htm",
    ".css",
    ".js",
    ".mjs",
    ".ts",
    ".tsx",
    ".jsx",
    ".py",
    ".pyi",
    ".rb",
    ".go",
    ".rs",
    ".java",
    ".kt",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".cs",
    ".php",
    ".pl",
    ".sh",
    ".bash",
    ".zsh",
    ".sql",
    ".r",
    ".swift",
    ".scala",
    ".lua",
    ".tex",
    ".log",
    ".diff",
    ".patch",
    ".env",
    ".dockerfile",
    ".gitignore",
    ".vue",
    ".svelte",
    ".ipynb",
}


# --- ownership ------------------------------------------------------------------------------


def attachment_ids(value: Any) -> list[int]:
    """Attachment ids from a request: a list of ints or digit strings (HTML forms send
    strings; one value arrives as a bare string). Raises invalid_input otherwise."""
    if value in (None, "", []):
        return []
    if isinstance(value, int | str) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_PER_MESSAGE:
        raise invalid(f"attachments must be a list of at most {MAX_PER_MESSAGE} attachment ids.")
    ids: list[int] = []
    for item in value:
        if isinstance(item, str) and item.isdigit() and len(item) < 18:
            item = int(item)
        if not isinstance(item, int) or isinstance(item, bool) or item < 1:
            raise invalid(
                f"attachments must be a list of at most {MAX_PER_MESSAGE} attachment ids."
            )
        if item not in ids:
            ids.append(item)
    return ids


def owned_attachments(user_id: int, value: Any, data_dir: str | None = None) -> list[int]:
    """The checked attachment ids of a request (`value`: ids or digit strings), if the user
    owns every one and every file is still on disk.

    Raises invalid_input for a malformed value and NumiError("attachment_missing", 404)
    for a missing or foreign id or a file gone from disk, before the caller changes
    anything: the send path (numi.agent.sending) and transcript edits both call this first.
    `data_dir` defaults to the current app's NUMI_DATA_DIR.
    """
    ids = attachment_ids(value)
    return [a.id for a in owned_rows(user_id, ids, data_dir)]


def owned_rows(user_id: int, ids: list[int], data_dir: str | None = None) -> list[Attachment]:
    """Like `owned_attachments()`, for checked ids, returning the rows in `ids` order."""
    if not ids:
        return []
    if data_dir is None:
        data_dir = current_app.config["NUMI_DATA_DIR"]
    rows = {
        a.id: a
        for a in db.session.execute(
            select(Attachment).where(Attachment.id.in_(ids), Attachment.user_id == user_id)
        ).scalars()
    }
    missing = [i for i in ids if i not in rows or not file_path(data_dir, rows[i]).is_file()]
    if missing:
        raise NumiError(
            "attachment_missing",
            "An attached file is missing or not yours; remove it and try again.",
            404,
        )
    return [rows[i] for i in ids]


def get_attachment(user_id: int, attachment_id: int) -> Attachment:
    """One of the user's attachments; 404 for a missing or foreign id."""
    return get_owned(Attachment, attachment_id, user_id, "attachment")


def message_attachment_ids(content_parts: Any) -> list[int]:
    """The attachment ids a message's content parts refer to."""
    return [
        p["id"]
        for p in content_parts or ()
        if isinstance(p, dict) and p.get("type") == "attachment" and isinstance(p.get("id"), int)
    ]


# A tool result's content part naming an image the tool showed the user (run_python's
# plots): a model that can see gets it downscaled with the result, any other the text only.
# Not an `attachment` part: the result shows no chip for it, and it never counts as attached.
TOOL_IMAGE = "tool_image"


def tool_image_ids(content_parts: Any) -> list[int]:
    """The images a tool result's content parts name for a model that can see."""
    return [
        p["id"]
        for p in content_parts or ()
        if isinstance(p, dict) and p.get("type") == TOOL_IMAGE and isinstance(p.get("id"), int)
    ]


def attachments_by_id(ids: list[int]) -> dict[int, Attachment]:
    if not ids:
        return {}
    return {
        a.id: a
        for a in db.session.execute(select(Attachment).where(Attachment.id.in_(ids))).scalars()
    }


def text_sizes(ids: list[int]) -> dict[int, int]:
    """Characters each attachment adds to a prompt (images: a fixed estimate), in one query
    that does not load the texts themselves."""
    if not ids:
        return {}
    rows = db.session.execute(
        select(Attachment.id, Attachment.mime, func.length(Attachment.extracted_text)).where(
            Attachment.id.in_(ids)
        )
    ).all()
    return {
        i: (IMAGE_CHARS_ESTIMATE if mime in IMAGE_TYPES else (length or 0))
        for i, mime, length in rows
    }


# --- storing --------------------------------------------------------------------------------


def file_path(data_dir: str, attachment: Attachment) -> Path:
    return Path(data_dir) / attachment.storage_path


def store_uploads(config, user_id: int, files: list[Any]) -> list[Attachment]:
    """Store the files of an upload request (each with `filename`, `mimetype` and a
    `stream`: werkzeug's FileStorage) as the user's attachments, in order: at most
    MAX_PER_MESSAGE of them (400 `too_many_files` before any is stored), each checked by
    `store_upload`."""
    if len(files) > MAX_PER_MESSAGE:
        raise invalid(f"At most {MAX_PER_MESSAGE} files at once.", "too_many_files")
    limit = config["NUMI_UPLOAD_MAX_BYTES"]
    return [
        # Read one byte past the limit: enough to know it is too large, no more.
        store_upload(
            config, user_id, item.filename or "", item.mimetype, item.stream.read(limit + 1)
        )
        for item in files
    ]


def store_upload(
    config, user_id: int, filename: str, declared_mime: str | None, data: bytes
) -> Attachment:
    """Check and store one upload; returns its (possibly existing) attachment row.

    The same user uploading the same bytes under the same name gets the same row; the
    file itself is stored once per content hash whatever the number of owners.
    """
    filename = _clean_filename(filename)
    if not data:
        raise invalid("The file is empty.", "empty_file")
    limit = config["NUMI_UPLOAD_MAX_BYTES"]
    if len(data) > limit:
        raise NumiError(
            "file_too_large",
            f"The file is larger than {limit // (1024 * 1024) or limit} "
            f"{'MB' if limit >= 1024 * 1024 else 'bytes'}.",
            413,
        )
    mime = detect_type(filename, declared_mime, data)
    if not type_allowed(mime, config["NUMI_UPLOAD_TYPES"]):
        raise NumiError("file_type", f"Files of type {mime} cannot be attached.", 415)
    extracted = _extract_text(mime, data, config)
    sha = hashlib.sha256(data).hexdigest()
    existing = (
        db.session.execute(
            select(Attachment).where(
                Attachment.user_id == user_id,
                Attachment.sha256 == sha,
                Attachment.filename == filename,
            )
        )
        .scalars()
        .first()
    )
    relative = f"uploads/{sha[:2]}/{sha}"
    _write_once(Path(config["NUMI_DATA_DIR"]) / relative, data)
    if existing is not None:
        return existing
    row = Attachment(
        user_id=user_id,
        filename=filename,
        mime=mime,
        size=len(data),
        sha256=sha,
        storage_path=relative,
        extracted_text=extracted,
    )
    db.session.add(row)
    db.session.commit()
    return row


def store_generated(config, user_id: int, filename: str, mime: str, data: bytes) -> Attachment:
    """Keep a file a tool made (run_python's images and files) as the user's attachment:
    stored like an upload, without the upload's type and size rules (the tool has its own),
    so the transcript, its reloads and exports link it. Committed at once."""
    sha = hashlib.sha256(data).hexdigest()
    relative = f"uploads/{sha[:2]}/{sha}"
    _write_once(Path(config["NUMI_DATA_DIR"]) / relative, data)
    row = Attachment(
        user_id=user_id,
        filename=_clean_filename(filename),
        mime=mime,
        size=len(data),
        sha256=sha,
        storage_path=relative,
    )
    db.session.add(row)
    db.session.commit()
    return row


def _clean_filename(name: str | None) -> str:
    name = os.path.basename((name or "").replace("\\", "/")).strip()
    name = "".join(ch for ch in name if ch.isprintable())[:200]
    return name or "file"


def _write_once(path: Path, data: bytes) -> None:
    if path.is_file():
        return
    for folder in reversed([path.parent, *path.parent.parents]):
        if not folder.exists():  # each level 0700 (mkdir's parents=True ignores the mode)
            folder.mkdir(mode=0o700, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    # 0600: uploads are the user's files, not for other local accounts.
    with open(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600), "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)  # atomic: a concurrent upload of the same bytes sees a whole file


def detect_type(filename: str, declared: str | None, data: bytes) -> str:
    """The attachment's MIME type from its bytes first, then its name: the browser's
    label is only a hint (a .png that is really HTML must not pass as an image)."""
    head = data[:16]
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    extension = os.path.splitext(filename.lower())[1]
    if _looks_textual(data):
        if extension == ".json":
            return "application/json"
        guessed = mimetypes.guess_type(filename)[0] or (declared or "")
        if guessed.startswith("text/"):
            return guessed
        return "text/plain"
    return (
        (declared or mimetypes.guess_type(filename)[0] or "application/octet-stream")
        .split(";")[0]
        .strip()
        .lower()
    )


def _looks_textual(data: bytes) -> bool:
    sample = data[:8192]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # a multi-byte character cut by the sample
    return True


def type_allowed(mime: str, allowed: tuple[str, ...]) -> bool:
    return any(mime == a or (a.endswith("/") and mime.startswith(a)) for a in allowed)


def is_image(attachment: Attachment) -> bool:
    return attachment.mime in IMAGE_TYPES


def _extract_text(mime: str, data: bytes, config) -> str | None:
    limit = config["NUMI_ATTACHMENT_MAX_TEXT_CHARS"]
    if mime == "application/pdf":
        text = pdf_text(data, PdfLimits.from_config(config))
    elif mime == DOCX_MIME:
        text = run_cpu(docx_text, data)  # unzipping and parsing XML: off the hub
    elif mime.startswith("text/") or mime == "application/json":
        text = data.decode("utf-8", "replace")
    else:
        return None
    if len(text) > limit:
        text = text[:limit] + f"\n[... cut: {len(text) - limit} more characters]"
    return text


def pdf_text(data: bytes, limits: PdfLimits) -> str:
    """The text of a PDF, page by page, read in a bounded child process (pdf_extract.py).
    A PDF over a limit keeps the pages read before it and ends with a note saying so.
    Raises NumiError("pdf_unreadable") for a broken or encrypted file."""
    pages, note, error = extract(data, limits)
    if error == ENCRYPTED:
        raise NumiError("pdf_unreadable", "The PDF is encrypted; attach an unlocked copy.", 415)
    if error:
        raise NumiError("pdf_unreadable", "The PDF could not be read.", 415)
    if note and not pages:  # a limit struck before the first page: nothing to keep
        raise NumiError("pdf_unreadable", f"The PDF could not be read: {note}.", 415)
    text = "\n\n".join(f"[page {n}]\n{page}" for n, page in enumerate(pages, 1) if page)
    if note:
        log.info("PDF text cut: %s", note)
        text += f"\n\n[... PDF cut: {note}]"
    return text


# --- images ---------------------------------------------------------------------------------


def image_bytes(data_dir: str, attachment: Attachment, max_side: int) -> tuple[str, bytes]:
    """(mime, bytes) of an image fit for a model: downscaled so its longer side is at most
    `max_side`, cached next to the original. Without Pillow the original is sent."""
    original = file_path(data_dir, attachment)
    try:
        from PIL import Image  # noqa: F401  # lazy: optional extra images
    except ImportError:
        return attachment.mime, original.read_bytes()
    cached = original.with_name(f"{original.name}.max{max_side}")
    if cached.is_file():
        data = cached.read_bytes()
        return _sniff_image(data) or attachment.mime, data
    mime, data = run_cpu(_downscale, original.read_bytes(), attachment.mime, max_side)
    _write_once(cached, data)
    return mime, data


def _sniff_image(data: bytes) -> str | None:
    mime = detect_type("", None, data)
    return mime if mime in IMAGE_TYPES else None


def _downscale(data: bytes, mime: str, max_side: int) -> tuple[str, bytes]:
    from PIL import Image  # lazy: optional extra images

    with Image.open(io.BytesIO(data)) as image:
        if max(image.size) <= max_side:
            return mime, data
        image.thumbnail((max_side, max_side))
        out = io.BytesIO()
        if mime == "image/jpeg":
            image.convert("RGB").save(out, "JPEG", quality=88)
            return "image/jpeg", out.getvalue()
        image.save(out, "PNG")
        return "image/png", out.getvalue()


def thumbnail(data_dir: str, attachment: Attachment) -> bytes | None:
    """A small PNG of an image attachment (cached), or None without Pillow."""
    try:
        from PIL import Image  # lazy: optional extra images
    except ImportError:
        return None
    original = file_path(data_dir, attachment)
    cached = original.with_name(f"{original.name}.thumb.png")
    if cached.is_file():
        return cached.read_bytes()

    def make() -> bytes:
        with Image.open(original) as image:
            image.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
            out = io.BytesIO()
            image.convert("RGBA").save(out, "PNG")
            return out.getvalue()

    data = run_cpu(make)
    _write_once(cached, data)
    return data


# --- what the model sees --------------------------------------------------------------------


def model_parts(
    data_dir: str, attachments: list[Attachment], *, vision: bool, max_side: int
) -> list[dict[str, Any]]:
    """Content parts for a model request: documents as text, images as image parts
    (bytes, never a data URL), or a short note when the model cannot see or a file is gone."""
    parts: list[dict[str, Any]] = []
    for attachment in attachments:
        path = file_path(data_dir, attachment)
        if is_image(attachment):
            if not vision:
                parts.append(
                    {
                        "type": "text",
                        "text": f"[image {attachment.filename!r} left out: this model cannot see images]",
                    }
                )
            elif not path.is_file():
                parts.append(
                    {
                        "type": "text",
                        "text": f"[image {attachment.filename!r} is no longer available]",
                    }
                )
            else:
                mime, data = image_bytes(data_dir, attachment, max_side)
                parts.append({"type": "image", "mime": mime, "data": data})
        elif attachment.extracted_text is not None:
            parts.append(
                {"type": "document", "name": attachment.filename, "text": attachment.extracted_text}
            )
        else:
            parts.append(
                {
                    "type": "text",
                    "text": f"[file {attachment.filename!r} ({attachment.mime}) cannot be read by the model]",
                }
            )
    return parts


# --- templates ------------------------------------------------------------------------------


def transcript_attachments(chat_id: str, messages) -> dict[int, list[Attachment]]:
    """The attachments each saved message of a chat shows (chips, thumbnails), by message
    id: one query for the whole transcript, none when no message has any. Scoped to the
    chat's owner: a message names ids, and only that user's files answer."""
    wanted = {
        m.id: message_attachment_ids(m.content_parts) for m in messages if m.content_parts_json
    }
    ids = {i for found in wanted.values() for i in found}
    if not ids:
        return {}

    rows = db.session.execute(
        select(Attachment)
        .join(Chat, Chat.user_id == Attachment.user_id)
        .where(Chat.id == chat_id, Attachment.id.in_(ids))
    ).scalars()
    by_id = {a.id: a for a in rows}
    return {
        message_id: [by_id[i] for i in found if i in by_id]
        for message_id, found in wanted.items()
        if found
    }


def transcript_checkpoints(chat_id: str) -> dict[int, Any]:
    """The chat's checkpoints by boundary message id, for transcript dividers."""
    rows = db.session.execute(
        select(Checkpoint).where(Checkpoint.chat_id == chat_id).order_by(Checkpoint.id)
    ).scalars()
    return {c.through_message_id: c for c in rows}


def human_size(size: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size}"
