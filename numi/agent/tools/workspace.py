"""Workspace file tools: list, read, search, write and patch files in the chat's workspace.

The workspace is the chat setting `workspace` (an existing directory; admin or single user
only). Every path the model gives is resolved with os.path.realpath and must stay inside
the workspace's real path (os.path.commonpath), checked on every access, so neither `..`
nor a symlink pointing outside can escape. Binary files and files larger than
NUMI_WORKSPACE_MAX_FILE_BYTES are refused with a message the model can act on.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any

import gevent
from flask import current_app

from ...data_dir import touches_data_dir
from . import Tool, ToolContext, ToolFailure

MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 200
MAX_SEARCH_FILES = 5000
MAX_READ_CHARS = 60_000
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}


class WorkspaceError(Exception):
    """A refused path or file; its message is the tool result."""

    def __init__(self, message: str, code: str = "workspace_error"):
        super().__init__(message)
        self.code = code


def workspace_root(context: ToolContext) -> str:
    """The chat's workspace as a real path, or WorkspaceError."""
    if not context.is_admin:
        raise WorkspaceError("Workspace tools are for the administrator (or the single user) only.")
    if not context.workspace:
        raise WorkspaceError("This chat has no workspace directory; set one in the chat settings.")
    root = os.path.realpath(context.workspace)
    if not os.path.isdir(root):
        raise WorkspaceError("The chat's workspace directory does not exist any more.")
    if touches_data_dir(root, current_app.config["NUMI_DATA_DIR"]):
        # Checked when the workspace is set, and again here: the data directory may have
        # moved, or the setting predates the rule.
        raise WorkspaceError(
            "Refused: the workspace is, contains or lies inside Numi's data directory.",
            "workspace_data_dir",
        )
    return root


def confined(root: str, path: Any) -> str:
    """`path` (relative to the workspace) as a real path inside `root`, or WorkspaceError."""
    if path in (None, ""):
        path = "."
    if not isinstance(path, str) or "\x00" in path:
        raise WorkspaceError("The path must be text.")
    resolved = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, resolved]) != root:
        raise WorkspaceError(f"Refused: {path!r} is outside the workspace.", "outside_workspace")
    return resolved


def _relative(root: str, path: str) -> str:
    return os.path.relpath(path, root)


def _max_bytes() -> int:
    return current_app.config["NUMI_WORKSPACE_MAX_FILE_BYTES"]


def _read_text(path: str, rel: Any) -> str:
    # `rel` is the path as the model gave it (None for the workspace itself), for messages.
    if not os.path.isfile(path):
        raise WorkspaceError(f"{rel} is not a file.")
    size = os.path.getsize(path)
    if size > _max_bytes():
        raise WorkspaceError(f"{rel} is too large ({size} bytes; the limit is {_max_bytes()}).")
    with open(path, "rb") as handle:
        data = handle.read()
    if b"\x00" in data[:8192]:
        raise WorkspaceError(f"{rel} is a binary file; only text files can be read.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError(f"{rel} is not UTF-8 text; only text files can be read.") from None


def _guarded(run):
    def wrapper(arguments: dict, context: ToolContext) -> Any:
        try:
            return run(arguments, workspace_root(context))
        except WorkspaceError as exc:
            raise ToolFailure(exc.code, f"Error: {exc}") from None

    return wrapper


def _list_files(arguments: dict, root: str) -> str:
    base = confined(root, arguments.get("path"))
    if not os.path.isdir(base):
        raise WorkspaceError(f"{arguments.get('path')} is not a directory.")
    recursive = bool(arguments.get("recursive"))
    lines: list[str] = []
    for directory, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(dirs) + sorted(files):
            full = os.path.join(directory, name)
            rel = _relative(root, full)
            if os.path.islink(full):
                lines.append(f"{rel} -> (symlink)")
            elif os.path.isdir(full):
                lines.append(rel + "/")
            else:
                lines.append(f"{rel}  ({os.path.getsize(full)} bytes)")
            if len(lines) >= MAX_LIST_ENTRIES:
                return "\n".join(lines) + f"\n[... listing stopped at {MAX_LIST_ENTRIES} entries]"
        if not recursive:
            break
        gevent.sleep(0)
    return "\n".join(lines) or "(empty directory)"


def _read_file(arguments: dict, root: str) -> str:
    rel = arguments.get("path")
    text = _read_text(confined(root, rel), rel)
    lines = text.splitlines()
    start = _line(arguments.get("start_line"), 1)
    end = _line(arguments.get("end_line"), len(lines))
    if start > max(len(lines), 1) or end < start:
        raise WorkspaceError(f"Lines {start}-{end} are outside {rel} ({len(lines)} lines).")
    chosen = lines[start - 1 : end]
    out = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(chosen, start))
    if len(out) > MAX_READ_CHARS:
        out = out[:MAX_READ_CHARS] + "\n[... cut; read a smaller line range]"
    return f"{rel} (lines {start}-{start + len(chosen) - 1} of {len(lines)}):\n{out}"


def _line(value: Any, default: int) -> int:
    if value in (None, ""):
        return default
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        raise WorkspaceError("Line numbers must be whole numbers.") from None


def _search_files(arguments: dict, root: str) -> str:
    pattern = arguments.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise WorkspaceError("Give a pattern to search for.")
    try:
        regex = re.compile(
            pattern if arguments.get("regex") else re.escape(pattern),
            0 if arguments.get("case_sensitive") else re.IGNORECASE,
        )
    except re.error as exc:
        raise WorkspaceError(f"The pattern is not a valid regular expression: {exc}.") from None
    base = confined(root, arguments.get("path"))
    glob = arguments.get("glob") if isinstance(arguments.get("glob"), str) else None
    matches: list[str] = []
    scanned = 0
    walk = (
        [(os.path.dirname(base), [], [os.path.basename(base)])]
        if os.path.isfile(base)
        else os.walk(base)
    )
    for directory, dirs, files in walk:
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(directory, d))
        )
        for name in sorted(files):
            full = os.path.join(directory, name)
            if glob and not fnmatch.fnmatch(name, glob):
                continue
            real = os.path.realpath(full)
            if os.path.commonpath([root, real]) != root or not os.path.isfile(real):
                continue  # a symlink out of the workspace: not followed
            scanned += 1
            if scanned > MAX_SEARCH_FILES:
                matches.append(f"[... stopped after {MAX_SEARCH_FILES} files]")
                return "\n".join(matches)
            if scanned % 20 == 0:
                gevent.sleep(0)  # a big tree is CPU work: let other greenlets run
            try:
                text = _read_text(real, name)
            except WorkspaceError:
                continue  # binary or huge: skipped in a search
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    matches.append(f"{_relative(root, full)}:{number}: {line[:300]}")
                    if len(matches) >= MAX_SEARCH_MATCHES:
                        matches.append(f"[... stopped at {MAX_SEARCH_MATCHES} matches]")
                        return "\n".join(matches)
    return "\n".join(matches) or "No matches."


def _content(arguments: dict, key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise WorkspaceError(f"{key} must be text.")
    if len(value.encode("utf-8")) > _max_bytes():
        raise WorkspaceError(f"{key} is larger than the file size limit ({_max_bytes()} bytes).")
    return value


def _write(path: str, text: str) -> None:
    # O_NOFOLLOW: a symlink planted after the check cannot redirect the write.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _write_file(arguments: dict, root: str) -> str:
    rel = arguments.get("path")
    if rel in (None, "", "."):
        raise WorkspaceError("Give the file's path.")
    path = confined(root, rel)
    text = _content(arguments, "content")
    if os.path.isdir(path):
        raise WorkspaceError(f"{rel} is a directory.")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
        confined(root, os.path.relpath(parent, root))
    existed = os.path.exists(path)
    _write(path, text)
    return f"{'Replaced' if existed else 'Created'} {_relative(root, path)} ({len(text.encode('utf-8'))} bytes)."


def _patch_file(arguments: dict, root: str) -> str:
    rel = arguments.get("path")
    path = confined(root, rel)
    text = _read_text(path, rel)
    old = arguments.get("old_string")
    new = _content(arguments, "new_string")
    if not isinstance(old, str) or not old:
        raise WorkspaceError("old_string must be the exact, non-empty text to replace.")
    count = text.count(old)
    if count == 0:
        raise WorkspaceError(
            f"old_string was not found in {rel}; read the file and copy the text exactly."
        )
    if count > 1 and not arguments.get("replace_all"):
        raise WorkspaceError(
            f"old_string occurs {count} times in {rel}; add context to make it unique, "
            "or set replace_all."
        )
    updated = text.replace(old, new) if arguments.get("replace_all") else text.replace(old, new, 1)
    if len(updated.encode("utf-8")) > _max_bytes():
        raise WorkspaceError("The patched file would be larger than the file size limit.")
    _write(path, updated)
    return f"Patched {_relative(root, path)}: {count if arguments.get('replace_all') else 1} replacement(s)."


_PATH = {"type": "string", "description": "A path relative to the workspace."}

WORKSPACE_TOOLS = [
    Tool(
        "list_files",
        "List files in the chat's workspace (a directory, optionally recursive).",
        {"type": "object", "properties": {"path": _PATH, "recursive": {"type": "boolean"}}},
        _guarded(_list_files),
        admin_only=True,
    ),
    Tool(
        "read_file",
        "Read a text file in the workspace, optionally only lines start_line..end_line (1-based).",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
            },
            "required": ["path"],
        },
        _guarded(_read_file),
        admin_only=True,
    ),
    Tool(
        "search_files",
        "Search the workspace's text files for a string (or regex); returns file:line: text.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": _PATH,
                "glob": {"type": "string", "description": "File name pattern, e.g. *.py"},
                "regex": {"type": "boolean"},
                "case_sensitive": {"type": "boolean"},
            },
            "required": ["pattern"],
        },
        _guarded(_search_files),
        admin_only=True,
    ),
    Tool(
        "write_file",
        "Create or replace a text file in the workspace with the given content.",
        {
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
        _guarded(_write_file),
        admin_only=True,
        needs_approval=True,
    ),
    Tool(
        "patch_file",
        "Replace an exact string in a workspace file (must be unique unless replace_all).",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"},
            },
            "required": ["path", "old_string", "new_string"],
        },
        _guarded(_patch_file),
        admin_only=True,
        needs_approval=True,
    ),
]
