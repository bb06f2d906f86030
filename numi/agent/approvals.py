"""Which tool calls wait for the user, and what exactly an approval approves.

- Every tool call gets an id of Numi's own (`new_call_id`), unique in the chat. The
  provider's id is kept beside it (`provider_id` on the stored call) only because the
  provider pairs calls and results by it on replay (`prepare_messages` puts it back). A
  provider can repeat an id, or a hostile model can reuse one on purpose; Numi's id never
  repeats, so one card, one approval and one run belong to exactly one call.
- An approval is bound to `call_digest(name, arguments)`: the card carries the digest of
  what it shows, the client sends it back with "approve", the TurnManager refuses an
  approval whose digest differs, and the runtime checks the digest of what it is about to
  run once more. Nothing runs that a card did not show.
- Policy per tool and chat: `ask` or `auto`. A chat's explicit `tool_policy[name]` wins;
  else the chat's older `auto_approve` switch makes every tool `auto` (old chats keep
  working as before); else the tool's default: `ask` for tools that change things (bash,
  write_file, patch_file, MCP tools not marked read-only), `auto` for the rest. A tool
  marked `always_ask` (`remember`) asks whatever the chat says.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from ..chat.chats import TOOL_POLICIES as POLICIES


def new_call_id() -> str:
    """A tool call id of Numi's own: random, so it is unique in the chat (and beyond)."""
    return f"nc_{uuid.uuid4().hex}"


def call_digest(name: str, arguments: Any) -> str:
    """SHA-256 of the tool name and arguments in a canonical JSON form."""
    text = json.dumps(
        [name, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def default_policy(tool: Any) -> str:
    return "ask" if getattr(tool, "needs_approval", False) else "auto"


def approval_policy(tool: Any, settings: dict[str, Any]) -> str:
    """`ask` or `auto` for `tool` in a chat with `settings`."""
    if getattr(tool, "always_ask", False):
        return "ask"
    explicit = settings.get("tool_policy")
    if isinstance(explicit, dict) and explicit.get(tool.name) in POLICIES:
        return explicit[tool.name]
    if settings.get("auto_approve"):
        return "auto"
    return default_policy(tool)
