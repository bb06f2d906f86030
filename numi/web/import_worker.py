"""The import's subprocess: `python -m numi.web.import_worker LIMITS_JSON < file > records`.

Decoding and checking an export is CPU work that grows with the file (a 10 MB ChatGPT
export, a 50,000-deep chain): in the server process it held the hub, and with it every
user, for minutes (issue 34). Here it runs in a child process at a lower priority, and the
server reads back small JSON lines (numi/web/import_runner.py):

The file is one JSON document, or JSON lines (one object a line, as Jan's messages.jsonl),
or a zip holding one (`numi.chat.import_archive`: Claude.ai's and ChatGPT's data exports).
A JSON array of conversations (ChatGPT, Claude.ai, Open WebUI) is read one conversation at
a time (`import_json.JsonItems`), twice, and never held whole: a 200 MB export costs this
process about one conversation's memory (issue 42); any other file is read whole.

- `{"error": {"code", "message"}}` for a file that is refused (nothing else follows);
- `{"kind": "prompts" | "memories", "document": ...}` for those small files, which the
  server imports as before;
- otherwise the records of `numi.chat.import_stream.records`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from .. import prompts as prompt_store
from ..chat import import_archive, import_stream, importer, memories as memory_store
from ..chat.imported import reads_conversations
from ..errors import NumiError
from .import_json import JsonItems
from .inputs import decode_json


def read_records(source: BinaryIO, limits: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The records of the import file `source` (seekable; see the module docstring)."""
    export = import_archive.ExportFile(source, limits["NUMI_MAX_REQUEST_BYTES"])
    reader = _conversations_format(export, limits)
    if reader is not None:
        yield from import_stream.conversation_records(
            reader, lambda: _conversations(export, limits), limits
        )
        return
    with export.open() as stream:
        raw = stream.read()
    document = _document(raw, limits["NUMI_MAX_JSON_DEPTH"])
    del raw
    if prompt_store.is_prompts_document(document):
        yield {"kind": "prompts", "document": document}
    elif memory_store.is_memories_document(document):
        yield {"kind": "memories", "document": document}
    else:
        yield from import_stream.records(document, limits)


def _conversations_format(export: import_archive.ExportFile, limits: dict[str, Any]):
    """The importer of a file that is a JSON array of conversations (ChatGPT's, Claude.ai's
    and Open WebUI's exports), found from its first element; None for any other file, which
    is read whole."""
    with export.open() as stream:
        text = JsonItems(stream.read, max_depth=limits["NUMI_MAX_JSON_DEPTH"])
        if text.first() != "[":
            return None
        try:
            first = next(iter(text.items()), None)
        except NumiError:
            return None  # read whole, the file's error is said as for any other file
    if first is None:
        return None
    try:
        reader = importer.detect_format([first])
    except NumiError:
        return None
    return reader if reads_conversations(reader) else None


def _conversations(export: import_archive.ExportFile, limits: dict[str, Any]) -> Iterator[Any]:
    with export.open() as stream:
        yield from JsonItems(stream.read, max_depth=limits["NUMI_MAX_JSON_DEPTH"]).items()


def _document(raw: bytes, max_depth: int) -> Any:
    """The file's JSON; or, for a file of JSON lines (Jan keeps a thread's messages so), the
    list of its lines' objects. A file that is neither is refused as JSON is."""
    try:
        return decode_json(raw, max_depth=max_depth, subject="The file", code="invalid_import")
    except NumiError as refused:
        try:
            lines = raw.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError:
            raise refused from None
        if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
            raise
        document = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                document.append(
                    decode_json(
                        line,
                        max_depth=max_depth,
                        subject=f"Line {number} of the file",
                        code="invalid_import",
                    )
                )
        return document


def main() -> int:
    os.nice(10)  # the server's own requests come first on a busy machine
    limits = json.loads(sys.argv[1])
    out = sys.stdout
    try:
        # stdin is the uploaded file itself (seekable): read in chunks, twice for a big one.
        for record in read_records(sys.stdin.buffer, limits):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    except NumiError as error:
        out.write(json.dumps({"error": error.to_dict()}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
