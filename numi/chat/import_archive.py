"""An export that arrives as a zip: the one file in it that Numi reads, taken out in memory.

Claude.ai and ChatGPT send their data export as a zip holding `conversations.json`; Cherry
Studio's backup zip holds `data.json`. Import takes the zip as it was downloaded. Nothing
is ever written to disk (an entry's path, `../` or absolute, names nothing here: only its
base name is compared), the entry is read through a cap whatever size the zip declares (a
zip bomb stops at the cap, `import_too_large`), and a damaged, cut short or encrypted zip
is refused (`invalid_import`). This runs in the import's subprocess, like the decoding.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from ..errors import NumiError
from .imported import invalid_import

ZIP_MAGIC = b"PK\x03\x04"
# The entries Numi reads, by base name, in order of preference; otherwise a zip's one JSON
# (or JSON lines) file.
KNOWN_ENTRIES = ("conversations.json", "data.json")


def is_zip(raw: bytes) -> bool:
    return raw[:4] == ZIP_MAGIC


def zipped_export(raw: bytes, limit: int) -> bytes:
    """The bytes of the export inside the zip `raw`, at most `limit` of them."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        entries = [e for e in archive.infolist() if not e.is_dir()]
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError):
        raise invalid_import("The zip file is damaged or cut short; download it again.") from None
    entry = _pick(entries)
    if entry.file_size > limit:
        raise _too_large(limit)
    try:
        with archive.open(entry) as member:
            data = member.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError):
        raise invalid_import("The zip file is damaged or cut short; download it again.") from None
    except RuntimeError:  # zipfile's "File is encrypted, password required"
        raise invalid_import(
            "The zip file is encrypted; export it again without a password."
        ) from None
    if len(data) > limit:
        raise _too_large(limit)
    return data


def _pick(entries: list[zipfile.ZipInfo]) -> zipfile.ZipInfo:
    by_name = {}
    for entry in entries:
        base = entry.filename.replace("\\", "/").rsplit("/", 1)[-1]
        depth = entry.filename.count("/")
        if base in KNOWN_ENTRIES and (base not in by_name or depth < by_name[base][0]):
            by_name[base] = (depth, entry)
    for name in KNOWN_ENTRIES:
        if name in by_name:
            return by_name[name][1]
    readable = [e for e in entries if e.filename.lower().endswith((".json", ".jsonl"))]
    if len(readable) == 1:
        return readable[0]
    raise invalid_import(
        "This zip holds no export Numi reads: it looks for conversations.json (Claude.ai, "
        "ChatGPT), data.json (Cherry Studio) or a single JSON file."
    )


def _too_large(limit: int) -> NumiError:
    return NumiError(
        "import_too_large",
        f"The export inside this zip is larger than {limit} bytes, the most one import may hold.",
    )
