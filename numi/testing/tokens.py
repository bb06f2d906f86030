"""The scripted provider's tokenizer: how many prompt tokens a request carries.

A real server counts with its model's tokenizer; the scripted one counts with this small,
deterministic stand-in so that tests can compare Numi's estimates with a count Numi did
not make. It behaves like a byte-pair tokenizer on the text it sees: a word (with its
leading space) is a token per five letters, a run of digits a token per three, every other
symbol a token of its own, and each message adds four tokens of framing. The tools block
is counted as the JSON it was sent as, so schemas cost what their text costs.

Scenario.usage(None, n) makes the server report this count as the prompt tokens.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(r" ?[A-Za-z]{1,5}| ?\d{1,3}|\s+|[^\sA-Za-z\d]{1,2}")
MESSAGE_FRAMING = 4
IMAGE_TOKENS = 765
_SKIPPED_KEYS = {"role", "type", "id", "tool_call_id", "call_id", "signature", "cache_control"}


def count_text(text: str) -> int:
    """Tokens of one text."""
    return len(_TOKEN.findall(text))


def _strings(value: Any) -> int:
    """Tokens of every text inside a message or block (keys that are framing excepted;
    an image counts a fixed amount, never its bytes)."""
    if isinstance(value, str):
        return count_text(value)
    if isinstance(value, list):
        return sum(_strings(item) for item in value)
    if isinstance(value, dict):
        if value.get("type") in ("image", "image_url", "input_image"):
            return IMAGE_TOKENS
        return sum(_strings(v) for k, v in value.items() if k not in _SKIPPED_KEYS)
    return 0


def count_prompt_tokens(protocol: str | None, body: Any) -> int:
    """The prompt tokens of a request body of `protocol` (system, messages, tools)."""
    if not isinstance(body, dict):
        return 0
    if protocol == "openai_responses":
        items = body.get("input")
        items = [{"content": items}] if isinstance(items, str) else items or []
        total = _strings(body.get("instructions") or "")
    else:
        items = body.get("messages") or []
        total = _strings(body.get("system") or "")
        if body.get("system"):
            total += MESSAGE_FRAMING
    total += sum(MESSAGE_FRAMING + _strings(item) for item in items if isinstance(item, dict))
    tools = body.get("tools")
    if tools:
        total += count_text(json.dumps(tools, separators=(",", ":")))
    return total
