"""Tools the model can call: a registry of named tools with JSON Schema parameters.

A tool is a plain function `run(arguments, context) -> str | dict | list`. Whatever goes
wrong inside it (an exception, a timeout, invalid arguments, an unknown name) becomes a
tool *result* the model can read, never an exception that ends the turn. A tool that
fails in a way it understands raises `ToolFailure(code, text)`: the model reads the text,
and the saved result says `ok: false` with that code.

Which tools a chat may use is a per-chat setting (`settings["tools"]`); the model only
receives the schemas of those. Tests register their own tools on the app's registry.

The tools Numi ships with register through the same `register(app)` hook as a NUMI_PLUGINS
module (`numi.agent.tools.default_tools`, loaded first by `create_app`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable


def _never() -> bool:
    return False


@dataclass
class ToolContext:
    """What a tool may know about the turn that called it."""

    user_id: int
    chat_id: str
    is_admin: bool = False
    timezone: str | None = None
    tz_offset_minutes: int | None = None
    workspace: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    # A long-running tool (run_python) streams what it prints to its card: `report(stream,
    # text)` emits `tool_output`; and it asks `stop_requested()` to honour Stop mid-run.
    report: Callable[[str, str], None] | None = None
    stop_requested: Callable[[], bool] = _never


@dataclass
class ToolResult:
    """A tool's answer that cites sources (web pages, documents).

    `sources` are dicts with `title`, `url` (http/https, or None for a document) and
    `content` (the passage the model reads; not stored). The runtime numbers them across
    the turn, shows the model `[n] title (url)` before each passage, and saves them (without
    `content`) as the final answer's `citation_sources`.
    """

    text: str
    sources: list[dict[str, Any]] = field(default_factory=list)
    # What the card shows besides the text (run_python's outputs, images and files): saved
    # in the result's meta as `display` and carried by `tool_end`, so a reload draws it too.
    display: dict[str, Any] | None = None


class ToolFailure(Exception):
    """A failure a tool reports itself (a refused address, a path outside the workspace,
    a command that exited non-zero): `text` is the result the model reads, `code` the
    stable reason kept in the message meta (`ok: false`, `error_code`)."""

    def __init__(self, code: str, text: str, display: dict[str, Any] | None = None):
        super().__init__(text)
        self.code = code
        self.text = text
        self.display = display  # as ToolResult.display: a failed run still shows its output


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], Any]
    needs_approval: bool = False
    # Asks whatever the chat's policy says (auto-approve included): `remember` writes only
    # with the user's yes.
    always_ask: bool = False
    # Writes the user's memory (`remember`): never offered in a temporary chat, which uses
    # no memory and leaves none behind.
    writes_memory: bool = False
    admin_only: bool = False
    timeout: float | None = None  # seconds; None: the configured default


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._providers: list[Callable[[int, bool, list[str] | None], list[Tool]]] = []

    def register(self, tool: Tool) -> Tool:
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def active(
        self,
        enabled: list[str] | None,
        *,
        is_admin: bool,
        user_id: int | None = None,
        temporary: bool = False,
    ) -> list[Tool]:
        """The tools a chat has turned on that this user may use, in a stable order.

        With `user_id`, the registered providers add that user's dynamic tools (e.g. the
        tools of their MCP servers) that `enabled` names. A `temporary` chat gets no tool
        that writes the user's memory.
        """
        if not enabled:
            return []
        tools = [self._tools[name] for name in enabled if name in self._tools]
        if user_id is not None:
            tools += self._provided(user_id, is_admin, list(enabled))
        return [
            tool
            for tool in tools
            if (is_admin or not tool.admin_only) and not (temporary and tool.writes_memory)
        ]

    # --- per-user dynamic tools -----------------------------------------------------------
    # A provider is `provider(user_id, is_admin, enabled) -> list[Tool]`: the tools of that
    # user that `enabled` (a chat's tool names; None: all, for settings pages) turns on. Its
    # tools are looked up per turn, so they can come and go without touching the registry.
    # A failing provider is logged and skipped: one broken MCP server must not end a turn.

    def add_provider(self, provider: Callable[[int, bool, list[str] | None], list[Tool]]) -> None:
        if provider not in self._providers:
            self._providers.append(provider)

    def available(self, user_id: int, *, is_admin: bool) -> list[Tool]:
        """Every tool this user could turn on: the registered ones, then their dynamic ones."""
        tools = [self._tools[name] for name in sorted(self._tools)]
        tools += self._provided(user_id, is_admin, None)
        return [tool for tool in tools if is_admin or not tool.admin_only]

    def _provided(self, user_id: int, is_admin: bool, enabled: list[str] | None) -> list[Tool]:
        tools: list[Tool] = []
        for provider in self._providers:
            try:
                tools += provider(user_id, is_admin, enabled)
            except Exception:
                logging.getLogger(__name__).exception("tool provider %r failed", provider)
        return tools
