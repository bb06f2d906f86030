"""The export in an uploaded file: the file itself, or the one entry of a zip that Numi reads.

Claude.ai and ChatGPT send their data export as a zip holding `conversations.json`; Cherry
Studio's backup zip holds `data.json`. Import takes the zip as it was downloaded and reads
that entry as a stream, never whole. Nothing is ever written to disk (an entry's path, `../`
or absolute, names nothing here: only its base name is compared), the entry is read
through a cap whatever size the zip declares (a zip bomb stops at the cap,
`import_too_large`), and a damaged, cut short or encrypted zip is refused
(`invalid_import`). This runs in the import's subprocess, like the decoding.
"""

from __future__ import annotations

import zipfile
import zlib
from typing import BinaryIO

from ..errors import NumiError
from .imported import invalid_import

ZIP_MAGIC = b"PK\x03\x04"
# The entries Numi reads, by base name, in order of preference; otherwise a zip's one JSON
# (or JSON lines) file.
KNOWN_ENTRIES = ("conversations.json", "data.json")


class ExportFile:
    """The export in the uploaded file `source` (seekable): the file itself, or the entry of
    a zip that Numi reads. `open()` gives its bytes from the start, as often as asked (the
    import reads a big file twice rather than hold it: numi/chat/import_stream.py)."""

    def __init__(self, source: BinaryIO, limit: int):
        self._source, self._limit = source, limit
        source.seek(0)
        self._entry: zipfile.ZipInfo | None = None
        if source.read(len(ZIP_MAGIC)) != ZIP_MAGIC:
            return
        try:
            source.seek(0)
            self._archive = zipfile.ZipFile(source)
            entries = [e for e in self._archive.infolist() if not e.is_dir()]
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError):
            raise _damaged() from None
        self._entry = _pick(entries)
        if self._entry.file_size > limit:
            raise _too_large(limit)

    def open(self) -> ExportStream:
        """The export's bytes from the start (close it, or use it in a `with`)."""
        if self._entry is None:
            self._source.seek(0)
            return ExportStream(self._source, None)
        try:
            member = self._archive.open(self._entry)
        except RuntimeError:  # zipfile's "File is encrypted, password required"
            raise _encrypted() from None
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError):
            raise _damaged() from None
        return ExportStream(member, self._limit)


class ExportStream:
    """`read(n)` over an export: a zip entry's damage and excess (a zip bomb inflates past
    its declared size) become the import's refusals, whatever the zip declared."""

    def __init__(self, stream: BinaryIO, limit: int | None):
        self._stream, self._limit, self._read = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._stream.read(size)
        except RuntimeError:
            raise _encrypted() from None
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError):
            raise _damaged() from None
        self._read += len(data)
        if self._limit is not None and self._read > self._limit:
            raise _too_large(self._limit)
        return data

    def close(self) -> None:
        if self._limit is not None:  # a zip entry; the uploaded file stays open for the next pass
            self._stream.close()

    def __enter__(self) -> ExportStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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


def _damaged() -> NumiError:
    return invalid_import("The zip file is damaged or cut short; download it again.")


def _encrypted() -> NumiError:
    return invalid_import("The zip file is encrypted; export it again without a password.")


def _too_large(limit: int) -> NumiError:
    return NumiError(
        "import_too_large",
        f"The export inside this zip is larger than {limit} bytes, the most one import may hold.",
    )
