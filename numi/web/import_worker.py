"""The import's subprocess: `python -m numi.web.import_worker LIMITS_JSON < file > records`.

Decoding and checking an export is CPU work that grows with the file (a 10 MB ChatGPT
export, a 50,000-deep chain): in the server process it held the hub, and with it every
user, for minutes (issue 34). Here it runs in a child process at a lower priority, and the
server reads back small JSON lines (numi/web/import_runner.py):

The file is one JSON document, or JSON lines (one object a line, as Jan's messages.jsonl),
or a zip holding one (`numi.chat.import_archive`: Claude.ai's and ChatGPT's data exports).

- `{"error": {"code", "message"}}` for a file that is refused (nothing else follows);
- `{"kind": "prompts" | "memories", "document": ...}` for those small files, which the
  server imports as before;
- otherwise the records of `numi.chat.import_stream.records`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from .. import prompts as prompt_store
from ..chat import import_archive, import_stream, memories as memory_store
from ..errors import NumiError
from .inputs import decode_json


def read_records(raw: bytes, limits: dict[str, Any]):
    """The records of the import file `raw` (see the module docstring)."""
    if import_archive.is_zip(raw):
        raw = import_archive.zipped_export(raw, limits["NUMI_MAX_REQUEST_BYTES"])
    document = _document(raw, limits["NUMI_MAX_JSON_DEPTH"])
    if prompt_store.is_prompts_document(document):
        yield {"kind": "prompts", "document": document}
    elif memory_store.is_memories_document(document):
        yield {"kind": "memories", "document": document}
    else:
        yield from import_stream.records(document, limits)


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
    raw = sys.stdin.buffer.read()
    out = sys.stdout
    try:
        for record in read_records(raw, limits):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    except NumiError as error:
        out.write(json.dumps({"error": error.to_dict()}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
