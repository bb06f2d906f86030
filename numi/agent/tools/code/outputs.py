"""A run's outputs, as the card shows them (`display`) and as the model reads them (text).

The card's `display` is saved in the result's meta, so a reload and an export show what the
live card showed: `outputs` in order (`stream` text by stdout/stderr, `text` results,
`image`s kept as the user's attachments, `html` sanitised (with its `source` when it
carries script, to run in the artifact sandbox on request), `error`s with their traceback
stripped of terminal colours), and `files` the run created or changed in its folder (each
kept as an attachment for download, or listed with its size past the limit).

The model reads text: streams and results capped together at NUMI_CODE_MAX_OUTPUT_CHARS
(a flood keeps its start and says how much was cut), a line per image and table. A model
that can see also gets the PNG and JPEG images themselves, downscaled, at request time
(agent/tool_runner.shown_images, agent/context_window); the text never holds base64.
"""

from __future__ import annotations

import base64
import os
import re
from html.parser import HTMLParser
from dataclasses import dataclass, field
from typing import Any, Callable

import gevent

from ....render.sanitize import sanitize
from ....chat.attachments import detect_type

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
SCRIPT_TAGS = {"script", "iframe", "object", "embed"}


class _ScriptFinder(HTMLParser):
    """Whether HTML wants to run something (an interactive chart, a widget): a script-capable
    element, an `on*` handler or a javascript: link, in its markup (not in escaped text)."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SCRIPT_TAGS or any(
            name.startswith("on") or "javascript:" in (value or "").lower() for name, value in attrs
        ):
            self.found = True


def carries_script(html: str) -> bool:
    finder = _ScriptFinder()
    finder.feed(html)
    return finder.found


IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")
# The largest HTML output with script kept whole for the artifact sandbox (it is saved in
# the result's meta and drawn into the page as escaped text); a larger one is shown sanitised.
MAX_SANDBOXED_CHARS = 200_000
MAX_FILES_LISTED = 50
MAX_FILES_SCANNED = 5000
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".ipynb_checkpoints"}


def plain(text: str) -> str:
    """Terminal colours out: IPython colours its tracebacks."""
    return ANSI.sub("", text)


@dataclass
class Collected:
    """Everything a run produced, gathered as its IOPub messages arrive."""

    max_chars: int
    keep_file: Callable[[str, str, bytes], int | None]  # (name, mime, bytes) -> attachment id
    report: Callable[[str, str], None] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    model_parts: list[str] = field(default_factory=list)
    chars: int = 0
    cut: int = 0

    def full(self) -> bool:
        return self.cut > 0

    def _text_room(self, text: str) -> str:
        """The part of `text` that fits the run's cap; the rest is counted as cut."""
        room = max(self.max_chars - self.chars, 0)
        if len(text) > room:
            self.cut += len(text) - room
            text = text[:room]
        self.chars += len(text)
        return text

    def add(self, kind: str, content: dict[str, Any]) -> None:
        """One IOPub message of the run."""
        if kind == "stream":
            self._stream(content.get("name") or "stdout", str(content.get("text") or ""))
        elif kind in ("display_data", "execute_result"):
            self._rich(content.get("data") or {}, kind == "execute_result")
        elif kind == "error":
            traceback = plain("\n".join(str(line) for line in content.get("traceback") or []))
            error = {
                "type": "error",
                "ename": str(content.get("ename") or "Error"),
                "evalue": str(content.get("evalue") or ""),
                "traceback": traceback[-8000:],
            }
            self.outputs.append(error)
            # The model reads the traceback's end (where it failed and why), past the cap.
            self.model_parts.append(traceback[-1500:] or f"{error['ename']}: {error['evalue']}")

    def _stream(self, name: str, text: str) -> None:
        text = self._text_room(text)
        if not text:
            return
        if self.report is not None:
            self.report(name, text)
        last = self.outputs[-1] if self.outputs else None
        if last and last["type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"type": "stream", "name": name, "text": text})
        self.model_parts.append(text if name == "stdout" else f"[stderr] {text}")

    def _rich(self, data: dict[str, Any], is_result: bool) -> None:
        described = str(data.get("text/plain") or "")
        for mime in IMAGE_TYPES:
            if mime in data:
                self._image(mime, data[mime], described)
                return
        if isinstance(data.get("text/html"), str):
            html = sanitize(data["text/html"])
            kept = self._text_room(html)
            if kept == html:
                # Script never runs on the page: the card shows the sanitised HTML, and offers
                # the whole document to run in the artifact sandbox (an opaque-origin frame).
                raw = data["text/html"]
                output: dict[str, Any] = {"type": "html", "html": html, "script_removed": False}
                if carries_script(raw):
                    output["script_removed"] = True
                    if len(raw) <= MAX_SANDBOXED_CHARS:
                        output["source"] = raw
                self.outputs.append(output)
            else:
                self.outputs.append({"type": "text", "text": self._text_room(described)})
            # A DataFrame's text form is what the model reads.
            self.model_parts.append(described or "[an HTML table was shown to the user]")
            return
        text = self._text_room(described)
        if text:
            self.outputs.append({"type": "text", "text": text, "result": is_result})
            self.model_parts.append(f"Out: {text}" if is_result else text)

    def _image(self, mime: str, value: Any, described: str) -> None:
        data = value.encode() if mime == "image/svg+xml" else _b64(value)
        if data is None:
            return
        extension = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}[mime]
        attachment_id = self.keep_file(f"output-{len(self.outputs) + 1}.{extension}", mime, data)
        self.outputs.append(
            {"type": "image", "mime": mime, "attachment_id": attachment_id, "size": len(data)}
        )
        self.model_parts.append(
            f"[image {mime}, {len(data)} bytes, shown to the user"
            + (f": {described[:200]}]" if described else "]")
        )

    def model_text(self) -> str:
        text = "".join(
            part if part.endswith("\n") else part + "\n" for part in self.model_parts
        ).rstrip("\n")
        if self.cut:
            text += f"\n[... {self.cut} more characters of output were cut]"
        return text


def _b64(value: Any) -> bytes | None:
    try:
        return base64.b64decode(value if isinstance(value, str) else "", validate=False)
    except ValueError:
        return None


def folder_state(folder: str) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime_ns)} of the files in `folder` (hidden ones and caches
    left out), to tell what a run created or changed."""
    state: dict[str, tuple[int, int]] = {}
    for directory, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if os.path.isfile(path) and not os.path.islink(path):
                state[os.path.relpath(path, folder)] = (info.st_size, info.st_mtime_ns)
            if len(state) >= MAX_FILES_SCANNED:
                return state
            if len(state) % 500 == 0:
                gevent.sleep(0)  # a large workspace: let the other greenlets run
    return state


def changed_files(
    folder: str,
    before: dict[str, tuple[int, int]],
    max_bytes: int,
    keep_file: Callable[[str, str, bytes], int | None],
) -> list[dict[str, Any]]:
    """The files the run created or changed: each kept for download up to `max_bytes`."""

    after = folder_state(folder)
    files = []
    for name in sorted(after):
        if before.get(name) == after[name]:
            continue
        size = after[name][0]
        entry: dict[str, Any] = {
            "name": name,
            "size": size,
            "new": name not in before,
            "attachment_id": None,
        }
        if size <= max_bytes:
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    data = handle.read(max_bytes + 1)
            except OSError:
                data = None
            if data is not None and len(data) <= max_bytes:
                mime = detect_type(name, None, data[:4096]) if data else "text/plain"
                entry["attachment_id"] = keep_file(os.path.basename(name), mime, data)
        files.append(entry)
        if len(files) >= MAX_FILES_LISTED:
            break
    return files
