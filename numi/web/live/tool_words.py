"""A tool call in words: the one short sentence a finished call reads as on the transcript
("Ran `ls -la`", "Searched the web for “…”"), and the risks an approval card states above
the code ("Runs a shell command in your workspace", "Reaches the network: example.com").

Pure functions of the tool's name, its arguments and its status, so a card reads the same
live and after a reload, and each rule is unit-tested. They return plain text in pieces:
the template escapes every piece and shows hidden characters (`reveal_hidden`), since a
command or a query is the model's text, not ours.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

# A piece of a sentence: ("text", …) as it is, ("code", …) in monospace, ("quote", …)
# between curly quotes.
Piece = tuple[str, str]

# How long a command, a path or a query may be on the one line before it is cut ("…"):
# the card underneath holds the whole of it.
CODE_CHARS = 60
QUOTE_CHARS = 80

MCP_PREFIX = "mcp__"

# Per tool: the verb when it has ended, while it runs, and as a request (waiting for
# approval, or not run), the argument it names and how, and what to say when that
# argument is missing (a result whose call is on an older page).
_SENTENCES: dict[str, tuple[tuple[str, str, str], str | None, str, str]] = {
    "bash": (("Ran", "Running", "Run"), "command", "code", "a command"),
    "run_python": (("Ran Python", "Running Python", "Run Python"), None, "", ""),
    "web_search": (
        ("Searched the web for", "Searching the web for", "Search the web for"),
        "query",
        "quote",
        "",
    ),
    "fetch_page": (("Read", "Reading", "Read"), "url", "host", "a web page"),
    "search_documents": (
        (
            "Searched your documents for",
            "Searching your documents for",
            "Search your documents for",
        ),
        "query",
        "quote",
        "",
    ),
    "list_files": (
        ("Listed files in", "Listing files in", "List files in"),
        "path",
        "code",
        "the workspace",
    ),
    "read_file": (("Read", "Reading", "Read"), "path", "code", "a file"),
    "search_files": (
        ("Searched the files for", "Searching the files for", "Search the files for"),
        "pattern",
        "quote",
        "",
    ),
    "write_file": (("Wrote", "Writing", "Write"), "path", "code", "a file"),
    "patch_file": (("Edited", "Editing", "Edit"), "path", "code", "a file"),
    "remember": (("Remembered", "Remembering", "Remember"), "text", "quote", "something"),
    "current_time": (("Checked the time", "Checking the time", "Check the time"), None, "", ""),
}

_ENDED = ("done", "failed", "halted")
_UNDER_WAY = ("preparing", "running")


def clipped(text: str, limit: int) -> str:
    """The first line of `text`, at most `limit` characters, "…" where anything was cut."""
    first, _, rest = text.strip().partition("\n")
    first = first.rstrip()
    if len(first) > limit:
        return first[: limit - 1].rstrip() + "…"
    return first + " …" if rest.strip() else first


def host_of(url: str) -> str:
    """The host a URL reaches ("example.com"), or the URL itself, cut, when it names none."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        host = None
    return host or clipped(url, CODE_CHARS)


def sentence(name: Any, arguments: Any, status: str) -> list[Piece]:
    """The call as one short sentence, in pieces. While it waits for approval the sentence
    names no argument: the card shows the command once, under it, whole."""
    name = str(name or "tool")
    args = arguments if isinstance(arguments, dict) else {}
    tense = 0 if status in _ENDED else 1 if status in _UNDER_WAY else 2
    if name.startswith(MCP_PREFIX) and "__" in name[len(MCP_PREFIX) :]:
        server, _, tool = name[len(MCP_PREFIX) :].partition("__")
        verb = ("Used", "Using", "Use")[tense]
        return [("text", verb + " "), ("code", tool), ("text", " on "), ("text", server)]
    rule = _SENTENCES.get(name)
    if rule is None:
        return [
            ("text", ("Used", "Using", "Use")[tense] + " "),
            ("code", clipped(name, CODE_CHARS)),
        ]
    verbs, key, kind, missing = rule
    verb = verbs[tense]
    value = args.get(key) if key else None
    if key is None:
        return [("text", verb)]
    if status == "approval" or not isinstance(value, str) or not value.strip():
        return [("text", f"{verb} {missing or 'something'}".strip())]
    if kind == "quote":
        return [("text", verb + " "), ("quote", clipped(value, QUOTE_CHARS))]
    if kind == "host":
        return [("text", verb + " "), ("text", host_of(value))]
    return [("text", verb + " "), ("code", clipped(value, CODE_CHARS))]


# What in a command or in code reaches the network, and what writes or deletes files.
_URL_HOST = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/\s'\"]*@)?(\[[^\]\s]+\]|[^/:\s'\"?#]+)")
_SHELL_NETWORK = re.compile(
    r"(?:^|[\s;&|(`$])(curl|wget|ssh|scp|sftp|rsync|nc|ncat|telnet|ftp|ping|dig|nslookup|host"
    r"|git\s+(?:clone|fetch|pull|push)|pip3?\s+install|npm\s+(?:install|i)|apt(?:-get)?\s+install)\b"
)
_SHELL_DELETES = re.compile(r"(?:^|[\s;&|(`$])(rm|rmdir|shred|unlink)\b|\s-delete\b")
_SHELL_WRITES = re.compile(
    r"(?:^|[\s;&|(`$])(mv|cp|tee|touch|mkdir|dd|truncate|chmod|chown|ln|patch|sed\s+-i\w*)\b"
    r"|(?<![0-9&>])>{1,2}\s*(?!&)[^\s&>]"
)
_PY_NETWORK = re.compile(
    r"^\s*(?:import|from)\s+(requests|urllib|httpx|socket|http\.client|aiohttp|ftplib|smtplib)\b",
    re.M,
)
_PY_DELETES = re.compile(r"\b(os\.remove|os\.unlink|os\.rmdir|shutil\.rmtree|\.unlink\(|\.rmdir\()")
_PY_WRITES = re.compile(
    r"""\bopen\([^)]*['"][^'"]*[wax+][^'"]*['"]|\.write_(?:text|bytes)\(|\.to_(?:csv|excel|json|parquet)\("""
    r"""|\.savefig\(|\bos\.(?:makedirs|mkdir|rename|replace)\(|\bshutil\.(?:copy\w*|move)\("""
)


def _hosts(text: str) -> list[str]:
    hosts: list[str] = []
    for match in _URL_HOST.finditer(text):
        host = match.group(1).strip("[]").lower()
        if host not in hosts:
            hosts.append(host)
    return hosts


def _network(text: str, tool_like: re.Pattern[str], *, off: bool = False) -> list[Piece]:
    if off:
        return []
    hosts = _hosts(text)
    if hosts:
        shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        return [("Reaches the network:", shown)]
    if tool_like.search(text):
        return [("May reach the network", "")]
    return []


def risks(name: Any, arguments: Any, *, python_network: bool = True) -> list[Piece]:
    """What approving the call lets happen, in words, most important first: each a phrase
    and what it names (a host, a path; "" for none). `python_network`: whether run_python's
    kernel may reach the network at all (NUMI_CODE_NETWORK)."""
    name = str(name or "")
    args = arguments if isinstance(arguments, dict) else {}
    if name == "bash":
        command = args.get("command") if isinstance(args.get("command"), str) else ""
        found = [("Runs a shell command in your workspace", "")]
        found += _network(command, _SHELL_NETWORK)
        if _SHELL_DELETES.search(command):
            found.append(("Deletes files", ""))
        if _SHELL_WRITES.search(command):
            found.append(("Writes files", ""))
        return found
    if name == "run_python":
        code = args.get("code") if isinstance(args.get("code"), str) else ""
        found = [("Runs Python on this machine", "")]
        found += _network(code, _PY_NETWORK, off=not python_network)
        if _PY_DELETES.search(code):
            found.append(("Deletes files", ""))
        if _PY_WRITES.search(code):
            found.append(("Writes files", ""))
        return found
    path = args.get("path") if isinstance(args.get("path"), str) else ""
    if name == "write_file":
        return [("Writes a file in your workspace:", path or "(no path)")]
    if name == "patch_file":
        return [("Changes a file in your workspace:", path or "(no path)")]
    if name == "remember":
        where = "this project's chats" if args.get("scope") == "project" else "every chat"
        return [(f"Keeps a memory that {where} will see", "")]
    if name in ("fetch_page", "web_search"):
        url = args.get("url") if isinstance(args.get("url"), str) else ""
        return [("Reaches the network:", host_of(url) if url else "a search engine")]
    if name.startswith(MCP_PREFIX) and "__" in name[len(MCP_PREFIX) :]:
        server = name[len(MCP_PREFIX) :].partition("__")[0]
        return [("Sends these arguments to the MCP server", server)]
    return [("Runs the tool", name or "(unnamed)")]
