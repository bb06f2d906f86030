"""MCP servers: a user's Model Context Protocol servers and their tools, per turn.

- A server is a McpServer row: Streamable HTTP by URL (anyone), or stdio by command
  (admins only: it runs a program on the Numi host). Its tools appear to the model as
  `mcp__<server>__<tool>` with the server's own JSON Schemas; a chat turns on one tool by
  that name, or every tool of a server with `mcp__<server>`.
- Calls go through the official `mcp` Python SDK (the optional extra `numi[mcp]`). The
  SDK is asyncio; Numi runs under gevent. Each SDK session runs in a real OS thread from
  gevent's threadpool with its own fresh event loop (`asyncio.run`), so the hub is never
  blocked and asyncio never meets gevent's loop. Every session has a time limit.
- Tool lists are cached per server for NUMI_MCP_TOOLS_CACHE_SECONDS; calls open a session
  per call (stateless: nothing to leak when a turn ends or the server restarts).
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
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

import gevent
from flask import current_app
from sqlalchemy import select

from ...addresses import AddressRefused, check_url
from ...crypto import SecretUnreadable, seal, unseal
from ...errors import NumiError, invalid
from ...extensions import db
from ...models import McpServer, utcnow
from . import Tool, ToolContext

log = logging.getLogger(__name__)

PREFIX = "mcp__"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
MAX_TOOLS_PER_SERVER = 100
MAX_RESULT_CHARS = 100_000
CACHE_KEY = "numi.mcp_tools_cache"
INSTALL_HINT = "pip install 'numi[mcp]'"


def sdk_available() -> bool:
    """Whether the optional `mcp` SDK is installed."""
    return importlib.util.find_spec("mcp") is not None


# --- servers (owner-scoped) ----------------------------------------------------------------


def list_servers(user_id: int) -> list[McpServer]:
    return list(db.session.execute(
        select(McpServer).where(McpServer.user_id == user_id, McpServer.deleted_at.is_(None)).order_by(McpServer.id)
    ).scalars())


def get_server(user_id: int, server_id: int) -> McpServer:
    """One of this user's servers; a foreign or deleted id is a 404."""
    server = db.session.get(McpServer, server_id)
    if server is None or server.user_id != user_id or server.deleted_at is not None:
        raise NumiError("not_found", "No such MCP server.", 404)
    return server


def _flag(value: Any) -> bool:
    return value in (True, 1) or (isinstance(value, str) and value.strip().lower() in ("1", "true", "on", "yes"))


def create_server(user_id: int, is_admin: bool, data: dict[str, Any]) -> McpServer:
    """Validate and add a server. Every bad field is a 400 with a stable code; nothing is saved."""
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name.strip()):
        raise invalid("The name must be 1–32 lowercase letters, digits, '-' or '_' (it prefixes the tool names).",
                      "invalid_name")
    name = name.strip()
    if any(s.name == name for s in list_servers(user_id)):
        raise NumiError("duplicate_name", f"You already have an MCP server named {name!r}.", 409)
    transport = data.get("transport") or "http"
    server = McpServer(user_id=user_id, name=name, transport=transport,
                       always_approve=_flag(data.get("always_approve")), enabled=True)
    if transport == "http":
        url = data.get("url")
        parts = urlsplit(url.strip()) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 500:
            raise invalid("The URL must be an http:// or https:// address (at most 500 characters).", "invalid_url")
        if not is_admin:
            try:
                check_url(url.strip(), resolvable=False)
            except AddressRefused as exc:
                log.info("MCP server URL of user %s refused: %s", user_id, exc)
                raise exc.to_error() from None
        server.url = url.strip()
    elif transport == "stdio":
        if not is_admin:
            raise NumiError("forbidden", "Only an administrator can add a stdio MCP server (it runs a program on the server).", 403)
        command = data.get("command")
        if not isinstance(command, str) or not command.strip() or len(command) > 500:
            raise invalid("Give the command that starts the server.", "invalid_command")
        server.command = command.strip()
        server.args = _string_list(data.get("args"), "args")
        env = data.get("env") or {}
        if isinstance(env, str):
            env = _env_lines(env)
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise invalid("env must map names to text values.", "invalid_env")
        # Sealed like endpoint keys: environment values are usually tokens.
        server.env = {name: seal(value) for name, value in env.items()}
    else:
        raise invalid("transport must be http or stdio.", "invalid_transport")
    db.session.add(server)
    db.session.commit()
    return server


def _string_list(value: Any, field: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = value.split()  # the form's field: arguments separated by spaces
    if not isinstance(value, list) or len(value) > 50 or not all(isinstance(v, str) for v in value):
        raise invalid(f"{field} must be a list of at most 50 text arguments.", f"invalid_{field}")
    return value


def _env_lines(value: str) -> dict[str, str]:
    env = {}
    for line in value.splitlines():
        if line.strip():
            key, sep, val = line.partition("=")
            if not sep or not key.strip():
                raise invalid("env lines must look like NAME=value.", "invalid_env")
            env[key.strip()] = val.strip()
    return env


def remove_server(server: McpServer) -> None:
    server.deleted_at = utcnow()
    db.session.commit()
    _forget(server.id)


def server_dict(server: McpServer) -> dict[str, Any]:
    return {"id": server.id, "name": server.name, "transport": server.transport, "url": server.url,
            "command": server.command, "args": server.args, "enabled": server.enabled,
            "always_approve": server.always_approve}


# --- the SDK, in a thread -------------------------------------------------------------------


def _in_thread(factory, timeout: float) -> Any:
    """Run the coroutine `factory()` to its end on a fresh event loop in a real OS thread.

    The calling greenlet waits without blocking the hub; the time limit is enforced inside
    the loop (asyncio.wait_for), so the session and its transport are closed when it fires.
    """
    async def bounded():
        return await asyncio.wait_for(factory(), timeout)

    def run():
        return asyncio.run(bounded())

    try:
        return gevent.get_hub().threadpool.spawn(run).get()
    except (asyncio.TimeoutError, TimeoutError):
        raise McpError(f"the MCP server did not answer within {timeout:g} s", "mcp_timeout") from None


class McpError(Exception):
    """A failed MCP session; the message is fit to show (no address, no port)."""

    def __init__(self, message: str, code: str = "mcp_error"):
        super().__init__(message)
        self.code = code


UNREACHABLE = "could not connect to the MCP server (mcp_unreachable); the server log has the details"


def _session_factory(spec: dict[str, Any], action):
    """A coroutine factory: connect with the SDK, initialize, run `action(session)`."""
    async def go():
        if spec["transport"] == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            transport = stdio_client(StdioServerParameters(command=spec["command"], args=spec["args"],
                                                           env=spec["env"] or None))
        else:
            from mcp.client.streamable_http import streamable_http_client

            client = _guarded_client() if spec.get("guarded") else None
            if client is not None:
                async with client:
                    async with streamable_http_client(spec["url"], http_client=client) as streams:
                        return await _run_in(streams, action)
            transport = streamable_http_client(spec["url"])
        async with transport as streams:
            return await _run_in(streams, action)

    return go


async def _run_in(streams, action):
    from mcp import ClientSession

    async with ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await action(session)


def _guarded_client():
    """An httpx client whose every request (redirects too) passes the address guard."""
    import httpx2

    from ...addresses import guarded_async_transport

    return httpx2.AsyncClient(transport=guarded_async_transport(), timeout=httpx2.Timeout(30, read=300))


def _spec(server: McpServer, guarded: bool = False) -> dict[str, Any]:
    # Plain values: the thread must not touch the database session or the ORM object.
    return {"id": server.id, "transport": server.transport, "url": server.url, "command": server.command,
            "args": server.args, "env": _unsealed_env(server), "guarded": guarded and server.transport == "http"}


def _unsealed_env(server: McpServer) -> dict[str, str]:
    """The stdio server's environment in clear (values stored by older versions are clear)."""
    try:
        return {name: unseal(value) for name, value in (server.env or {}).items()}
    except SecretUnreadable:
        raise NumiError("mcp_env_unreadable", f"The environment of MCP server {server.name!r} cannot be read with "
                        "this server's secret key (NUMI_SECRET_KEY changed?). Enter it again.", 409) from None


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    # mcp 2 uses snake_case attributes, mcp 1 camelCase: read either.
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def fetch_tools(spec: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """The server's tools as plain dicts (name, description, input_schema, destructive)."""
    if not sdk_available():
        raise McpError(f"the MCP SDK is not installed ({INSTALL_HINT})")
    return _run_session(spec, {"op": "list"}, timeout)


async def _list_tools(session) -> list[dict[str, Any]]:
    tools, cursor = [], None
    for _ in range(10):  # pages
        if cursor:
            from mcp.types import PaginatedRequestParams

            result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        else:
            result = await session.list_tools()
        tools += result.tools
        cursor = _attr(result, "next_cursor", "nextCursor")
        if not cursor or len(tools) >= MAX_TOOLS_PER_SERVER:
            break
    out = []
    for tool in tools[:MAX_TOOLS_PER_SERVER]:
        annotations = getattr(tool, "annotations", None)
        schema = _attr(tool, "input_schema", "inputSchema", default={}) or {}
        out.append({"name": tool.name, "description": tool.description or "",
                    "input_schema": schema if isinstance(schema, dict) else {},
                    "destructive": not _read_only(annotations)})
    return out


def _read_only(annotations: Any) -> bool:
    """Whether the server marks a tool read-only (and not destructive at the same time)."""
    return (_attr(annotations, "read_only_hint", "readOnlyHint", default=False) is True
            and _attr(annotations, "destructive_hint", "destructiveHint", default=False) is not True)


def needs_approval(server: McpServer, info: dict[str, Any]) -> bool:
    """The tool's default policy is `ask`: it may change things, or the server always asks."""
    return bool(server.always_approve or info["destructive"])


def _action(request: dict[str, Any]):
    async def action(session):
        if request["op"] == "list":
            return await _list_tools(session)
        return _result_text(await session.call_tool(request["name"], request["arguments"]))

    return action


def _run_session(spec: dict[str, Any], request: dict[str, Any], timeout: float) -> Any:
    """One SDK session doing `request`; plain data back.

    HTTP sessions run in a threadpool thread. stdio sessions run in a small child process
    (`python -m numi.agent.tools.mcp`): asyncio must start the server's process itself, and
    under gevent's monkey-patching a subprocess can only be started from the hub's thread.
    """
    try:
        if spec.get("guarded"):
            check_url(spec["url"], resolvable=False)  # a clear refusal first; the transport checks every hop
        if spec["transport"] == "stdio" and _gevent_patched():
            return _in_bridge(spec, request, timeout)
        return _in_thread(_session_factory(spec, _action(request)), timeout)
    except McpError:
        raise
    except Exception as exc:
        refused = _refusal(exc)
        log.info("MCP session with server %s failed: %s", spec["id"], _describe(exc))
        if refused is not None:
            raise McpError("that address is refused: private, loopback and other internal addresses are for "
                           "administrators only (address_refused)", "address_refused") from None
        raise McpError(UNREACHABLE, "mcp_unreachable") from None


def _gevent_patched() -> bool:
    from gevent import monkey

    return monkey.is_module_patched("subprocess")


def _in_bridge(spec: dict[str, Any], request: dict[str, Any], timeout: float) -> Any:
    import os
    import sys

    from gevent import subprocess as gsubprocess

    # The bridge needs Python's own variables, never Numi's settings or provider keys.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMI_", "OPENAI_", "ANTHROPIC_")) and "KEY" not in k and "TOKEN" not in k
           and "SECRET" not in k and "PASSWORD" not in k}
    payload = json.dumps({"spec": spec, "request": request, "timeout": timeout})
    try:
        done = gsubprocess.run([sys.executable, "-m", "numi.agent.tools.mcp"], input=payload.encode(),
                               capture_output=True, timeout=timeout + 10, env=env)
    except gsubprocess.TimeoutExpired:
        raise McpError(f"the MCP server did not answer within {timeout:g} s", "mcp_timeout") from None
    try:
        answer = json.loads(done.stdout.decode() or "{}")
    except ValueError:
        answer = {}
    if "error" in answer or "result" not in answer:
        detail = answer.get("error") or f"the MCP bridge failed: {done.stderr.decode()[-300:]}"
        if answer.get("timeout"):
            raise McpError(detail, "mcp_timeout")
        log.info("MCP stdio session with server %s failed: %s", spec["id"], detail)
        raise McpError(UNREACHABLE, "mcp_unreachable")
    return answer["result"]


def _bridge_main() -> None:
    """`python -m numi.agent.tools.mcp`: run one session from the JSON on stdin (no gevent here)."""
    import sys

    job = json.loads(sys.stdin.read())
    try:
        result = asyncio.run(asyncio.wait_for(_session_factory(job["spec"], _action(job["request"]))(), job["timeout"]))
        print(json.dumps({"result": result}))
    except (asyncio.TimeoutError, TimeoutError):
        print(json.dumps({"error": f"the MCP server did not answer within {job['timeout']:g} s", "timeout": True}))
    except BaseException as exc:  # report, do not crash: the parent reads stdout
        print(json.dumps({"error": _describe(exc)}))


def call_tool(spec: dict[str, Any], tool_name: str, arguments: dict[str, Any], timeout: float) -> str:
    """Call one tool; its result as text (an error result raises McpError)."""
    outcome = _run_session(spec, {"op": "call", "name": tool_name, "arguments": arguments}, timeout)
    if outcome["is_error"]:
        raise McpError(outcome["text"] or "the tool reported an error")
    return outcome["text"][:MAX_RESULT_CHARS]


def _result_text(result: Any) -> dict[str, Any]:
    parts = []
    for item in getattr(result, "content", None) or ():
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            parts.append(getattr(resource, "text", None) or f"[resource {getattr(resource, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'} omitted]")
    structured = _attr(result, "structured_content", "structuredContent")
    text = "\n".join(parts) if parts else (json.dumps(structured, ensure_ascii=False) if structured else "")
    return {"text": text, "is_error": bool(_attr(result, "is_error", "isError", default=False))}


def _refusal(exc: BaseException) -> AddressRefused | None:
    """The guard's refusal behind `exc` (anyio and httpx wrap it), if that is what failed."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, AddressRefused):
            return exc if exc.address is not None else None  # "does not resolve" is plain unreachable
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        else:
            exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _describe(exc: BaseException) -> str:
    # anyio wraps failures in exception groups: name the first real cause.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {str(exc)[:300]}"


# --- tools for a turn ----------------------------------------------------------------------


def _cache() -> dict[int, tuple[float, list[dict[str, Any]]]]:
    return current_app.extensions.setdefault(CACHE_KEY, {})


def _forget(server_id: int) -> None:
    current_app.extensions.get(CACHE_KEY, {}).pop(server_id, None)


def server_tools(server: McpServer, *, refresh: bool = False, guarded: bool = True) -> list[dict[str, Any]]:
    """The server's tools, from the short cache when fresh. `guarded`: the owner is not an
    admin, so the connection passes the address guard."""
    config = current_app.config
    cached = _cache().get(server.id)
    if cached and not refresh and time.monotonic() - cached[0] < config["NUMI_MCP_TOOLS_CACHE_SECONDS"]:
        return cached[1]
    tools = fetch_tools(_spec(server, guarded), config["NUMI_MCP_TIMEOUT_SECONDS"])
    _cache()[server.id] = (time.monotonic(), tools)
    return tools


def tool_name(server_name: str, name: str) -> str:
    """The model-facing name: `mcp__<server>__<tool>`, reduced to what every provider accepts."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    return f"{PREFIX}{server_name}__{safe}"[:64]


def _make_tool(server: McpServer, info: dict[str, Any], guarded: bool) -> Tool:
    spec = _spec(server, guarded)
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
    """The registry provider: this user's MCP tools that `enabled` turns on (None: all)."""
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
            infos = server_tools(server, guarded=not is_admin)
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
        tools = server_tools(server, refresh=True, guarded=not is_admin)
    except McpError as exc:
        return False, f"Could not connect: {exc}"
    names = ", ".join(t["name"] for t in tools[:20]) or "none"
    return True, f"Connected: {len(tools)} tool{'s' if len(tools) != 1 else ''} ({names})."


test_server.__test__ = False  # not a pytest test, despite the name


if __name__ == "__main__":
    _bridge_main()
