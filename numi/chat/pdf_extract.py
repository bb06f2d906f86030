"""PDF text extraction in a child process with its own bounds (issue 28, item 8).

pypdf is pure Python and trusts a file's compression: a 249 KB PDF whose FlateDecode
streams inflate to gigabytes held a thread for 47 s and kept 263 MB. So extraction runs in
`python -m numi.chat.pdf_extract`, a child with an address-space limit (RLIMIT_AS) and a
CPU limit, that stops at a page count, a character count and a cap on any one decoded
stream, and writes one JSON line per page as it goes. The parent waits for it without
blocking the hub (gevent.subprocess) and kills it at the wall-clock limit; whatever pages
arrived before a limit are kept, with a note saying where and why the text stops.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass

from .. import child_process

UNREADABLE = "unreadable"
# How long the child may take to start (see `extract`); only a hang gets near it.
START_SECONDS = 120
ENCRYPTED = "encrypted"


@dataclass(frozen=True)
class PdfLimits:
    """The bounds of one extraction; built from the NUMI_PDF_* settings."""

    max_pages: int
    max_chars: int
    max_seconds: float
    max_memory_bytes: int
    max_stream_bytes: int

    @classmethod
    def from_config(cls, config) -> PdfLimits:
        return cls(
            max_pages=config["NUMI_PDF_MAX_PAGES"],
            max_chars=config["NUMI_ATTACHMENT_MAX_TEXT_CHARS"],
            max_seconds=config["NUMI_PDF_MAX_SECONDS"],
            max_memory_bytes=config["NUMI_PDF_MAX_MEMORY_MB"] * 1024 * 1024,
            max_stream_bytes=config["NUMI_PDF_MAX_STREAM_MB"] * 1024 * 1024,
        )


def extract(data: bytes, limits: PdfLimits) -> tuple[list[str], str | None, str | None]:
    """(page texts, note when a limit cut the text, error code) for the PDF `data`, from a
    bounded child process. The error is UNREADABLE or ENCRYPTED when no page could be read."""
    args = json.dumps(
        {
            "max_pages": limits.max_pages,
            "max_chars": limits.max_chars,
            "max_stream_bytes": limits.max_stream_bytes,
        }
    )
    process = child_process.start(
        "numi.chat.pdf_extract",
        [args],
        memory_bytes=limits.max_memory_bytes,
        cpu_seconds=int(limits.max_seconds) + 1,
    )
    pages: list[str] = []
    note = error = None
    import gevent  # lazy: start-up time

    try:
        # The child's start (a Python and pypdf imported) is not the PDF's time: on a busy
        # machine it alone can take seconds. The limit counts from the child's "ready"; the
        # start has a deadline of its own that only catches a hang.
        with gevent.Timeout(START_SECONDS):
            ready = process.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise ValueError("the PDF reader did not start")
        with gevent.Timeout(limits.max_seconds):
            process.stdin.write(data)
            process.stdin.close()
            for line in process.stdout:
                item = json.loads(line)
                if "page" in item:
                    pages.append(item["text"])
                elif "stop" in item:
                    note = item["stop"]
                elif "error" in item:
                    error = item["error"]
            process.wait()
    except gevent.Timeout:
        note = f"the PDF took longer than {limits.max_seconds:g} s to read"
    except (BrokenPipeError, ValueError):
        pass
    finally:
        child_process.stop(process)
        process.stdout.close()
    if note is None and error is None and process.returncode not in (0, None):
        # Killed by RLIMIT_CPU or a MemoryError under RLIMIT_AS: keep what came.
        note = f"reading the PDF needed more than {limits.max_memory_bytes // (1024 * 1024)} MB or its CPU time"
    if error and not pages:
        return [], None, error
    return pages, note, None


def _emit(item: dict) -> None:
    sys.stdout.write(json.dumps(item) + "\n")
    sys.stdout.flush()


def _cap_streams(cap: int) -> None:
    """pypdf's own caps on what one stream may inflate to: a configuration object since
    pypdf 7, module constants before it."""
    try:
        from pypdf._configuration import overwrite_configuration  # lazy: start-up time
    except ImportError:
        import pypdf.filters  # lazy: start-up time

        for name in (
            "ZLIB_MAX_OUTPUT_LENGTH",
            "LZW_MAX_OUTPUT_LENGTH",
            "RUN_LENGTH_MAX_OUTPUT_LENGTH",
            "MAX_DECLARED_STREAM_LENGTH",
            "MAX_ARRAY_BASED_STREAM_OUTPUT_LENGTH",
        ):
            if hasattr(pypdf.filters, name):
                setattr(pypdf.filters, name, cap)
        return
    overwrite_configuration(
        zlib_maximum_output_length=cap,
        lzw_maximum_output_length=cap,
        run_length_maximum_output_length=cap,
        maximum_declared_stream_length=cap,
        array_based_stream_maximum_output_length=cap,
        brotli_maximum_output_length=cap,
        jbig2_maximum_output_length=cap,
    )


def main() -> None:
    """Child side: read the PDF on stdin, write one JSON line per page, stop at a limit."""
    limits = json.loads(sys.argv[1])

    from pypdf import PdfReader  # lazy: start-up time
    from pypdf.errors import LimitReachedError, PdfReadError  # lazy: start-up time

    _cap_streams(limits["max_stream_bytes"])
    _emit({"ready": True})
    data = sys.stdin.buffer.read()
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            _emit({"error": ENCRYPTED})
            return
        count = len(reader.pages)
    except (
        PdfReadError,
        LimitReachedError,
        ValueError,
        KeyError,
        TypeError,
        OSError,
        MemoryError,
        RecursionError,
    ):
        _emit({"error": UNREADABLE})
        return
    chars = 0
    for number in range(count):
        if number >= limits["max_pages"]:
            _emit({"stop": f"only the first {limits['max_pages']} of {count} pages were read"})
            return
        try:
            text = (reader.pages[number].extract_text() or "").strip()
        except LimitReachedError:
            # pypdf's caps: a stream inflating past max_stream_bytes, or too many operators.
            _emit(
                {
                    "stop": f"page {number + 1} inflates past {limits['max_stream_bytes'] // (1024 * 1024)} MB "
                    "or holds too many operators; the text stops before it"
                }
            )
            return
        except MemoryError:
            _emit(
                {
                    "stop": f"page {number + 1} needs more memory than allowed; the text stops before it"
                }
            )
            return
        except (PdfReadError, ValueError, KeyError, TypeError, OSError, RecursionError):
            text = ""
        _emit({"page": number + 1, "text": text})
        chars += len(text)
        if chars >= limits["max_chars"] and number + 1 < count:
            _emit({"stop": f"the text limit was reached after page {number + 1} of {count}"})
            return


if __name__ == "__main__":
    main()
