"""MCP servers: a user's Model Context Protocol servers and their tools, per turn.

- A server is a McpServer row: Streamable HTTP by URL (anyone), or stdio by command
  (admins only: it runs a program on the Numi host). Its tools appear to the model as
  `mcp__<server>__<tool>` with the server's own JSON Schemas; a chat turns on one tool by
  that name, or every tool of a server with `mcp__<server>`.
- Calls go through the official `mcp` Python SDK (the optional extra `numi[mcp]`). The
  SDK is asyncio; Numi runs under gevent. Each SDK session runs in a real OS thread from
  gevent's threadpool with its own fresh event loop (`asyncio.run`), so the hub is never
  blocked and asyncio never meets gevent's loop. Every session has a time limit.
- Each SDK session runs in the bridge's own pool of NUMI_MCP_THREADS threads, never the
  hub's shared pool (it also resolves DNS for provider requests).
- Tool lists are kept per server in the catalog (fresh for NUMI_MCP_TOOLS_CACHE_SECONDS,
  failures with back-off) and refreshed by a background greenlet: pages never open a
  session. Calls open a session per call (stateless: nothing to leak when a turn ends or
  the server restarts).
- Approval: a tool asks the user first (policy `ask`, agent/approvals.py) unless its
  server marks it read-only (annotations.readOnlyHint, and not destructiveHint): the MCP
  spec's own default for an unmarked tool is "may be destructive". A server the user set to
  always ask asks for every tool.
- Addresses: a non-admin's HTTP server is held to the address guard (numi/addresses.py)
  when it is added and on every request, redirects included; an admin's may be on
  loopback. Connection failures reach the user as a stable code and a sentence naming no
  address or port; the detail goes to the log.
- stdio servers get the SDK's minimal environment (PATH, HOME, ...) plus the env the admin
  set for that server: Numi's own secrets never reach them.

The tools reach turns through a provider on the tool registry (see ToolRegistry.add_provider).

Modules: `store` (the server rows and the tool-list cache), `catalog` (what each server's
tool list is, refreshed in the background), `bridge` (the SDK sessions in a
thread or a child process), `provider` (the registry's `Tool`s per turn). This package
exports what the rest of Numi calls.
"""

from .bridge import McpError, configure_pool
from .catalog import state as server_state
from .provider import PREFIX, needs_approval, provide_tools, server_tools, test_server, tool_name
from .store import (
    INSTALL_HINT,
    create_server,
    get_server,
    list_servers,
    remove_server,
    sdk_available,
    server_dict,
)

__all__ = [
    "INSTALL_HINT",
    "PREFIX",
    "McpError",
    "configure_pool",
    "create_server",
    "get_server",
    "list_servers",
    "needs_approval",
    "provide_tools",
    "remove_server",
    "sdk_available",
    "server_dict",
    "server_state",
    "server_tools",
    "test_server",
    "tool_name",
]
