"""A step's tool calls as the transcript lays them out: a run of consecutive finished calls
of the same tool folds under one line in words ("Read 3 pages: a.com, b.org", "Searched the
web for “x”, “y”") that opens to the cards (partials/_tool_steps.html); any other call
stands alone.

A call that runs, failed, was refused or waits for approval is never folded: the user must
see it without opening anything. Pure functions of the cards (numi.web.live.tool_cards), so
the saved page and the live page, which both draw the step from its saved calls and
results, fold the same way. Like `tool_words`, the line comes back as plain text in pieces
for the template to escape and to show hidden characters in.
"""

from __future__ import annotations

from typing import Any

from .tool_words import CODE_CHARS, MCP_PREFIX, Piece, clipped, host_of

# How many of a run's arguments its line names before "…": the cards hold them all.
NAMED = 3
# Shorter than a single sentence's: several share the line.
ITEM_CHARS = min(CODE_CHARS, 40)

# Per tool: the line with {n} for the count, the argument it lists and how ("host", "quote",
# "code"; None: it lists none).
_SUMMARIES: dict[str, tuple[str, str | None, str]] = {
    "fetch_page": ("Read {n} pages:", "url", "host"),
    "web_search": ("Searched the web for", "query", "quote"),
    "search_documents": ("Searched your documents for", "query", "quote"),
    "search_files": ("Searched the files for", "pattern", "quote"),
    "read_file": ("Read {n} files:", "path", "code"),
    "write_file": ("Wrote {n} files:", "path", "code"),
    "patch_file": ("Edited {n} files:", "path", "code"),
    "list_files": ("Listed files in {n} folders:", "path", "code"),
    "bash": ("Ran {n} commands", None, ""),
    "run_python": ("Ran Python {n} times", None, ""),
    "remember": ("Remembered {n} things", None, ""),
    "current_time": ("Checked the time {n} times", None, ""),
}


def foldable(card: dict[str, Any]) -> bool:
    """Whether a card may fold into a run: only a call that ended well."""
    return card.get("status") == "done" and bool(card.get("name"))


def groups(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cards in their order, as groups: {"cards": [...], "summary": pieces} for a run
    of two or more finished calls of one tool, {"cards": [card], "summary": None} for a
    card that stands alone."""
    laid_out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def close_run() -> None:
        if len(run) > 1:
            laid_out.append({"cards": list(run), "summary": summary(run)})
        else:
            laid_out.extend({"cards": [card], "summary": None} for card in run)
        run.clear()

    for card in cards:
        if foldable(card) and (not run or run[0].get("name") == card.get("name")):
            run.append(card)
            continue
        close_run()
        if foldable(card):
            run.append(card)
        else:
            laid_out.append({"cards": [card], "summary": None})
    close_run()
    return laid_out


def summary(cards: list[dict[str, Any]]) -> list[Piece]:
    """The one line a run of calls of one tool reads as, in pieces."""
    name = str(cards[0].get("name") or "tool")
    n = len(cards)
    rule = _SUMMARIES.get(name)
    if rule is None:
        if name.startswith(MCP_PREFIX) and "__" in name[len(MCP_PREFIX) :]:
            server, _, tool = name[len(MCP_PREFIX) :].partition("__")
            return [("text", "Used "), ("code", tool), ("text", f" on {server} {n} times")]
        return [("text", "Used "), ("code", clipped(name, CODE_CHARS)), ("text", f" {n} times")]
    line, key, kind = rule
    head = line.format(n=n)
    values = _named(cards, key, kind) if key else []
    if not values:
        # A run whose arguments are gone (results on an older page) still says how many.
        if "{n}" in line:
            return [("text", head.rstrip(":"))]
        return [("text", f"{head.removesuffix(' for')} {n} times")]
    pieces: list[Piece] = [("text", head + " ")]
    for i, value in enumerate(values[:NAMED]):
        if i:
            pieces.append(("text", ", "))
        pieces.append((kind if kind != "host" else "text", value))
    if len(values) > NAMED:
        pieces.append(("text", ", …"))
    elif "{n}" not in line and len(values) < n:
        pieces.append(("text", f" ({n} times)"))  # the same query again
    return pieces


def _named(cards: list[dict[str, Any]], key: str, kind: str) -> list[str]:
    """The run's arguments as its line names them, each once, in order."""
    values: list[str] = []
    for card in cards:
        args = card.get("arguments")
        value = args.get(key) if isinstance(args, dict) else None
        if not isinstance(value, str) or not value.strip():
            continue
        shown = host_of(value) if kind == "host" else clipped(value, ITEM_CHARS)
        if shown not in values:
            values.append(shown)
    return values
