"""The MCP tool provider: each enabled server's tools as registry `Tool`s for one turn, named
`mcp__<server>__<tool>`, asking for approval unless the server marks a tool read-only."""

from __future__ import annotations

import logging
import re
from typing import Any

from flask import current_app

from ....models import McpServer
from .. import Tool, ToolContext
from .bridge import McpError, call_tool
from .catalog import cached_tools, refresh_now, server_spec, tools_for_turn
from .store import INSTALL_HINT, list_servers, sdk_available

log = logging.getLogger(__name__)
PREFIX = "mcp__"


def needs_approval(server: McpServer, info: dict[str, Any]) -> bool:
    """The tool's default policy is `ask`: it may change things, or the server always asks."""
    return bool(server.always_approve or info["destructive"])


def server_tools(server: McpServer, *, guarded: bool = True) -> list[dict[str, Any]]:
    """What is known of the server's tools, without waiting (pages and the API). `guarded`:
    the owner is not an admin, so the connection passes the address guard."""
    return cached_tools(server, guarded=guarded)


def tool_name(server_name: str, name: str) -> str:
    """The model-facing name: `mcp__<server>__<tool>`, reduced to what every provider accepts."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    return f"{PREFIX}{server_name}__{safe}"[:64]


def _make_tool(server: McpServer, info: dict[str, Any], guarded: bool) -> Tool:
    spec = server_spec(server, guarded)
    remote_name = info["name"]
    timeout = float(current_app.config["NUMI_MCP_TIMEOUT_SECONDS"])

    def run(arguments: dict[str, Any], context: ToolContext) -> str:
        try:
            return call_tool(spec, remote_name, arguments, timeout)
        except McpError as exc:
            return f"Error from MCP server {server.name!r}: {exc}"

    schema = info["input_schema"] or {"type": "object", "properties": {}}
    return Tool(
        name=tool_name(server.name, remote_name),
        description=(f"[MCP {server.name}] " + (info["description"] or remote_name))[:1024],
        parameters=schema,
        run=run,
        needs_approval=needs_approval(server, info),
        admin_only=server.transport == "stdio",
        timeout=timeout + 5,  # the SDK's own limit fires first and closes the session
    )


def _wanted(server_name: str, enabled: list[str] | None) -> set[str] | None:
    """None: every tool of the server; a set: those names; empty: none."""
    if enabled is None:
        return None
    prefix = f"{PREFIX}{server_name}"
    if prefix in enabled:
        return None
    return {name for name in enabled if name.startswith(prefix + "__")}


def provide_tools(user_id: int, is_admin: bool, enabled: list[str] | None) -> list[Tool]:
    """The registry provider: this user's MCP tools that `enabled` turns on (None: all, for
    a page: then only the catalog is read and no session is opened)."""
    if enabled is not None and not any(name.startswith(PREFIX) for name in enabled):
        return []  # the common case: no MCP in this chat, no database query
    if not sdk_available():
        return []
    tools: list[Tool] = []
    for server in list_servers(user_id):
        if not server.enabled or (server.transport == "stdio" and not is_admin):
            continue
        wanted = _wanted(server.name, enabled)
        if wanted is not None and not wanted:
            continue
        try:
            # A page (enabled None) reads the catalog only; a turn may wait for a first listing.
            infos = (
                cached_tools(server, guarded=not is_admin)
                if enabled is None
                else tools_for_turn(server, guarded=not is_admin)
            )
        except McpError as exc:
            log.info("MCP server %s (user %s) unavailable: %s", server.name, user_id, exc)
            continue
        for info in infos:
            tool = _make_tool(server, info, guarded=not is_admin)
            if wanted is None or tool.name in wanted:
                tools.append(tool)
    return tools


def test_server(server: McpServer, is_admin: bool = False) -> tuple[bool, str]:
    """Connect and list the tools: (ok, a sentence for the settings page naming no address)."""
    if not sdk_available():
        return False, f"The MCP SDK is not installed: {INSTALL_HINT}"
    try:
        tools = refresh_now(server, guarded=not is_admin)
    except McpError as exc:
        return False, f"Could not connect: {exc}"
    names = ", ".join(t["name"] for t in tools[:20]) or "none"
    return True, f"Connected: {len(tools)} tool{'s' if len(tools) != 1 else ''} ({names})."
