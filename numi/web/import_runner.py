"""Running an import in the background: the upload's request returns at once with the job.

`start_import` records the job (one running import per user: `import_running`) and spawns
its greenlet, which outlives the request. The file is decoded and checked in a child
process (numi/web/import_worker.py), never on the hub; the greenlet reads back small
records and writes them a batch per transaction (numi/chat/import_writer.py), yielding to
the hub between batches, so other users' pages and turns go on (issue 34). The job's row
says how far it got; its end reveals everything at once, or a failure deletes what it wrote.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tempfile
import time
from typing import TYPE_CHECKING, Any, BinaryIO

import gevent
from flask import Flask

from .. import child_process, prompts as prompt_store
from ..chat import import_archive, import_jobs, memories as memory_store, project_transfer
from ..chat.import_writer import ChatWriter, imported_before
from ..errors import NumiError
from ..extensions import db
from ..models import ImportJob
from .attachments import _schedule_indexing
from ..lazy_modules import lazy_module

# The readers of every export format (the import worker child's code, run here for a small
# file) are loaded by the first import, not at start-up.
if TYPE_CHECKING:
    from ..chat import import_formats
    from . import import_worker
else:
    import_formats = lazy_module("numi.chat.import_formats")
    import_worker = lazy_module("numi.web.import_worker")

log = logging.getLogger(__name__)

# The child may use this much memory and CPU time to decode and check one file (a file at
# NUMI_MAX_REQUEST_BYTES needs a fraction of both); past them it is killed and the import
# fails, changing nothing.
_CHILD_MEMORY_BYTES = 4 * 1024**3
_CHILD_CPU_SECONDS = 600
_LIMIT_PREFIXES = ("NUMI_MAX_", "NUMI_IMPORT_", "NUMI_UPLOAD_")
# After each batch the writer sleeps this many times as long as the batch took.
_YIELD_FACTOR = 2
# A file up to this size is read in the threadpool (milliseconds); a larger one in a child.
_IN_PROCESS_BYTES = 256 * 1024
# An upload is copied to a file of the job's own in pieces this big, kept in memory up to
# the small file's size, and looked at this far for whether it is blank.
_SPOOL_CHUNK_BYTES = 1024 * 1024
_SPOOL_MEMORY_BYTES = _IN_PROCESS_BYTES
_BLANK_CHECK_BYTES = 4096


def start_import(app: Flask, user_id: int, upload: BinaryIO, *, preview: bool = False) -> ImportJob:
    """Start importing the uploaded file `upload` (an open, seekable file, on disk when it is
    big: it is never read whole in this process) for `user_id`; returns the running job,
    which closes the file when it ends. With `preview`, the job reads and checks the whole
    file the same way and writes nothing: its result is what an import would add
    (`preview_result`)."""
    try:
        job = import_jobs.start_job(user_id)
    except BaseException:
        upload.close()
        raise
    # Not waited for at shutdown: a job cut short is ended by its heartbeat (import_jobs).
    gevent.spawn(_run, app, job.id, upload, preview)
    return job


def spooled(stream) -> BinaryIO:
    """A file of the job's own holding what `stream` (an upload, a request body) gives, in
    memory while small and on disk past that: the request's own file is closed when the
    request ends, and a 200 MB export must not sit in this process's memory."""
    copy = tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY_BYTES)
    try:
        while chunk := stream.read(_SPOOL_CHUNK_BYTES):
            copy.write(chunk)
            gevent.sleep(0)  # a big upload is copied between other requests
    except BaseException:
        copy.close()
        raise
    copy.seek(0)
    return copy


def is_blank(upload: BinaryIO) -> bool:
    """Whether the file is empty or only white space (a big file never is, to this check)."""
    upload.seek(0)
    start = upload.read(_BLANK_CHECK_BYTES + 1)
    upload.seek(0)
    return len(start) <= _BLANK_CHECK_BYTES and not start.strip()


def _run(app: Flask, job_id: int, upload: BinaryIO, preview: bool = False) -> None:
    with upload, app.app_context():
        beat = gevent.spawn(_heartbeat, app, job_id)
        try:
            _import(app, db.session.get(ImportJob, job_id), upload, preview)
        except NumiError as error:
            db.session.rollback()
            import_jobs.fail(job_id, error)
        except Exception:
            log.exception("import job %s failed", job_id)
            db.session.rollback()
            import_jobs.fail(
                job_id,
                NumiError("import_failed", "The import failed; nothing was imported.", 500),
            )
        finally:
            beat.kill()


def _heartbeat(app: Flask, job_id: int) -> None:
    """Touch the job while the child reads a big file (the batches touch it too)."""
    with app.app_context():
        while True:
            gevent.sleep(import_jobs.HEARTBEAT_SECONDS)
            import_jobs.touch(job_id)


def _import(app: Flask, job: ImportJob, upload: BinaryIO, preview: bool = False) -> None:
    config = app.config
    with _reader(config, upload) as child:
        head = child.record()
        if "error" in head:
            raise NumiError(head["error"]["code"], head["error"]["message"])
        kind = head["kind"]
        if preview:
            import_jobs.started(job, kind, head.get("messages", 0))
            import_jobs.finish(job, {"preview": preview_result(job, head, child)})
            db.session.commit()
            return
        if kind in ("prompts", "memories"):
            import_jobs.started(job, kind, 0)
            result = _import_small(job.user_id, kind, head["document"], config)
            import_jobs.finish(job, result)
            db.session.commit()
            return
        import_jobs.started(job, kind, head["messages"])
        settings = (
            project_transfer.check_project(job.user_id, head, config) if kind == "project" else {}
        )
        writer = ChatWriter(job)
        while "end" not in (record := child.record()):
            started = time.perf_counter()
            if "chat" in record:
                writer.begin_chat(record["chat"])
            else:
                writer.write(record["messages"])
            # At most a third of the hub's time: after each batch, twice as long for the
            # others (a turn waits at each of its steps, and meets a batch at most there).
            gevent.sleep(_YIELD_FACTOR * (time.perf_counter() - started))
    _reveal(app, writer, head, settings)


def preview_result(job: ImportJob, head: dict[str, Any], child) -> dict[str, Any]:
    """What importing the file would do, from its checked records, writing nothing: its
    kind and format, its chats and messages, the files they name (kept as names), and how
    many of its chats are there already."""
    result: dict[str, Any] = {
        "kind": head["kind"],
        "format": head.get("format"),
        "chats": head.get("chats", 0),
        "messages": head.get("messages", 0),
        "attachments": 0,
        "imported_before": 0,
        "unreadable": head.get("unreadable", 0),
        "unreadable_chats": head.get("unreadable_chats", []),
    }
    if head["kind"] in ("chats", "project"):
        while "end" not in (record := child.record()):
            if "chat" in record and imported_before(job, record["chat"]):
                result["imported_before"] += 1
            for message in record.get("messages", ()):
                result["attachments"] += import_formats.file_references(
                    message.get("content") or ""
                )
    return result


def _reveal(app: Flask, writer: ChatWriter, head: dict[str, Any], settings: dict) -> None:
    """The job's last transaction: the project (if any) and every chat appear at once."""
    job, config = writer.job, app.config
    if head["kind"] == "project":
        project, file_ids = project_transfer.create_project(job.user_id, head, settings, config)
        writer.reveal(project.id)
        result = {"project": project.to_dict()}
    else:
        chats, file_ids = writer.reveal(), []
        result = {
            "chat": chats[0].to_dict() if chats else None,
            "chats": [chat.to_dict() for chat in chats],
            "skipped": writer.skipped,  # chats this user had from an earlier import
            "unreadable": head.get("unreadable", 0),
            "unreadable_chats": head.get("unreadable_chats", []),
        }
    import_jobs.finish(job, result)
    db.session.commit()
    if file_ids:
        for attachment_id in file_ids:
            _schedule_indexing(attachment_id)


def _import_small(user_id: int, kind: str, document: Any, config) -> dict[str, Any]:
    """A prompts or memories file: a few hundred rows at most, imported as before."""
    if kind == "prompts":
        done = prompt_store.import_prompts(user_id, document)
        return {
            "prompts": [p.to_dict() for p in done["created"]],
            "skipped": done["skipped"],
            "renamed": done["renamed"],
        }
    done = memory_store.import_memories(user_id, document, config)
    return {
        "memories": [m.to_dict() for m in done["created"]],
        "skipped": done["skipped"],
    }


def _reader(config, upload: BinaryIO):
    """The file's records: read in the threadpool when it is small (a few milliseconds of
    work; a process would cost more than the reading), else in the worker subprocess, which
    reads the file itself."""
    # Only the limits the checks read: a child's argument list is visible to every local user.
    limits = {k: v for k, v in config.items() if k.startswith(_LIMIT_PREFIXES)}
    upload.seek(0)
    zipped = upload.read(len(import_archive.ZIP_MAGIC)) == import_archive.ZIP_MAGIC
    upload.seek(0, os.SEEK_END)
    # A small zip may inflate to the request limit: always the child's to read.
    if upload.tell() <= _IN_PROCESS_BYTES and not zipped:
        upload.seek(0)
        raw = io.BytesIO(upload.read())
        return _Read(gevent.get_hub().threadpool.apply(_read_all, (raw, limits)))
    return _Child(limits, upload)


def _read_all(raw: BinaryIO, limits: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return list(import_worker.read_records(raw, limits))
    except NumiError as error:
        return [{"error": error.to_dict()}]


class _Read:
    """The records of a small file, already read."""

    def __init__(self, records: list[dict[str, Any]]):
        self._records = iter(records)

    def __enter__(self) -> _Read:
        return self

    def record(self) -> dict[str, Any]:
        return next(self._records)

    def __exit__(self, *exc_info) -> None:
        pass


class _Child:
    """The worker subprocess, reading the file itself (its stdin) and read back one record
    at a time."""

    def __init__(self, limits: dict[str, Any], upload: BinaryIO):
        self._upload = upload
        self._args = [json.dumps(limits)]

    def __enter__(self) -> _Child:
        self._upload.seek(0)
        self._process = child_process.start(
            "numi.web.import_worker",
            self._args,
            memory_bytes=_CHILD_MEMORY_BYTES,
            cpu_seconds=_CHILD_CPU_SECONDS,
            stdin=self._upload,
        )
        return self

    def record(self) -> dict[str, Any]:
        line = self._process.stdout.readline()
        if not line:
            self._process.wait()
            raise NumiError(
                "import_failed",
                "Reading the file took more memory or time than one import may use; "
                "nothing was imported.",
                500,
            )
        return json.loads(line)

    def __exit__(self, *exc_info) -> None:
        child_process.stop(self._process)
        self._process.stdout.close()
