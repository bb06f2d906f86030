"""Anthropic's prompt cache, as the scripted provider plays it: a request's
`cache_control` breakpoints write its prefix up to each of them, and a later request whose
prefix matches one written before reads it. The prefix runs tools, then system, then the
messages' blocks (PROTOCOLS); a match is exact, block by block, `cache_control` itself not
counted. The usage then says what a real server says: `cache_read_input_tokens`,
`cache_creation_input_tokens`, and `input_tokens` for the rest. Lifetimes and the minimum
cacheable length are not played: every breakpoint writes."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from .tokens import MESSAGE_FRAMING, _strings, count_prompt_tokens, count_text


class PromptCache:
    """The prefixes written so far, by their hash (thread-safe: requests come in parallel)."""

    def __init__(self) -> None:
        self._written: dict[str, int] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._written.clear()

    def account(self, body: Any) -> tuple[int, int, int] | None:
        """(read, written, uncached) prompt tokens of an Anthropic request body, or None
        when it asks for no caching."""
        blocks = _blocks(body)
        marked = [i for i, (_, _, mark) in enumerate(blocks) if mark]
        if not marked:
            return None
        total = count_prompt_tokens("anthropic", body)
        digest, tokens, prefixes = hashlib.sha256(), 0, []
        for key, count, _mark in blocks[: marked[-1] + 1]:
            digest.update(key.encode())
            tokens += count
            prefixes.append((digest.hexdigest(), tokens))
        with self._lock:
            read = max((t for h, t in prefixes if h in self._written), default=0)
            for index in marked:
                self._written[prefixes[index][0]] = prefixes[index][1]
        written = max(0, prefixes[-1][1] - read)
        return read, written, max(0, total - read - written)


def message_start_usage(scenario: Any) -> dict[str, int]:
    """The usage of Anthropic's `message_start`: the scenario's input tokens, or, for a
    request the cache accounted (`Scenario.cache_usage`), its read, written and the rest."""
    if scenario.cache_usage is None:
        input_tokens = scenario.usage_tokens[0] if scenario.usage_tokens else 0
        return {"input_tokens": input_tokens, "output_tokens": 1}
    read, written, uncached = scenario.cache_usage
    return {
        "input_tokens": uncached,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
        "output_tokens": 1,
    }


def _blocks(body: Any) -> list[tuple[str, int, bool]]:
    """The request's prefix as (the block's key, its tokens, whether it is marked)."""
    if not isinstance(body, dict):
        return []
    out: list[tuple[str, int, bool]] = []

    def add(kind: str, block: Any, tokens: int) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        plain = {k: v for k, v in block.items() if k != "cache_control"} if marked else block
        out.append((kind + json.dumps(plain, sort_keys=True), tokens, marked))

    for tool in body.get("tools") or ():
        add("tool", tool, count_text(json.dumps(tool, separators=(",", ":"))))
    system = body.get("system")
    if isinstance(system, str):
        add("system", system, _strings(system) + MESSAGE_FRAMING)
    for block in system if isinstance(system, list) else ():
        add("system", block, _strings(block) + MESSAGE_FRAMING)
    for message in body.get("messages") or ():
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for index, block in enumerate(blocks or ()):
            framing = MESSAGE_FRAMING if index == 0 else 0
            add(message.get("role", ""), block, _strings(block) + framing)
    return out
