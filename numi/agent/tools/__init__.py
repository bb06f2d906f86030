"""Tools the model can call: a registry of named tools with JSON Schema parameters.

A tool is a plain function `run(arguments, context) -> str | dict | list`. Whatever goes
wrong inside it (an exception, a timeout, invalid arguments, an unknown name) becomes a
tool *result* the model can read, never an exception that ends the turn.

Which tools a chat may use is a per-chat setting (`settings["tools"]`); the model only
receives the schemas of those. Tests register their own tools on the app's registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


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


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], Any]
    needs_approval: bool = False
    admin_only: bool = False
    timeout: float | None = None  # seconds; None: the configured default


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def active(self, enabled: list[str] | None, *, is_admin: bool) -> list[Tool]:
        """The tools a chat has turned on that this user may use, in a stable order."""
        if not enabled:
            return []
        tools = [self._tools[name] for name in enabled if name in self._tools]
        return [tool for tool in tools if is_admin or not tool.admin_only]


def default_registry() -> ToolRegistry:
    """The tools Numi ships with."""
    from .clock import CURRENT_TIME

    registry = ToolRegistry()
    registry.register(CURRENT_TIME)
    return registry
