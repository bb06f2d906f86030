"""The bridge to the official `mcp` SDK: asyncio sessions run in an OS thread (HTTP) or a child
process (stdio under gevent), each with its own event loop and time limit.

It takes plain specs (dicts), never ORM rows: the thread must not touch the database session."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from gevent import monkey, subprocess as gsubprocess

from ....addresses import AddressRefused, check_url, guarded_async_transport
from .store import INSTALL_HINT, sdk_available

log = logging.getLogger(__name__)
MAX_TOOLS_PER_SERVER = 100
MAX_RESULT_CHARS = 100_000


# --- the SDK, in a thread -------------------------------------------------------------------

# MCP sessions get a thread pool of their own: the hub's shared pool also resolves DNS for
# provider requests, so a hanging MCP server holding its threads would stall every user.
# One pool per process (a forked worker makes its own), sized by NUMI_MCP_THREADS.
_pool: dict[str, Any] = {}


def configure_pool(size: int) -> None:
    """Size the process's MCP pool (create_app calls it; a pool already made keeps its threads)."""
    _pool["size"] = max(1, int(size))


def session_pool():
    """This process's bounded pool of OS threads for MCP sessions."""
    from gevent.threadpool import ThreadPool  # lazy: start-up time

    if _pool.get("pid") != os.getpid():
        _pool.update(pid=os.getpid(), pool=ThreadPool(_pool.get("size", 4)))
    return _pool["pool"]


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
        return session_pool().spawn(run).get()
    except (asyncio.TimeoutError, TimeoutError):
        raise McpError(
            f"the MCP server did not answer within {timeout:g} s", "mcp_timeout"
        ) from None


class McpError(Exception):
    """A failed MCP session; the message is fit to show (no address, no port)."""

    def __init__(self, message: str, code: str = "mcp_error"):
        super().__init__(message)
        self.code = code


UNREACHABLE = (
    "could not connect to the MCP server (mcp_unreachable); the server log has the details"
)


def _session_factory(spec: dict[str, Any], action):
    """A coroutine factory: connect with the SDK, initialize, run `action(session)`."""

    async def go():
        if spec["transport"] == "stdio":
            # lazy: optional extra mcp
            from mcp.client.stdio import StdioServerParameters, stdio_client

            transport = stdio_client(
                StdioServerParameters(
                    command=spec["command"], args=spec["args"], env=spec["env"] or None
                )
            )
        else:
            # lazy: optional extra mcp
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
    from mcp import ClientSession  # lazy: optional extra mcp

    async with ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await action(session)


def _guarded_client():
    """An httpx client whose every request (redirects too) passes the address guard."""
    import httpx2  # lazy: start-up time

    return httpx2.AsyncClient(
        transport=guarded_async_transport(), timeout=httpx2.Timeout(30, read=300)
    )


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    # mcp 2 uses snake_case attributes, mcp 1 camelCase: read either.
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _read_only(annotations: Any) -> bool:
    """Whether the server marks a tool read-only (and not destructive at the same time)."""
    return (
        _attr(annotations, "read_only_hint", "readOnlyHint", default=False) is True
        and _attr(annotations, "destructive_hint", "destructiveHint", default=False) is not True
    )


def fetch_tools(spec: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """The server's tools as plain dicts (name, description, input_schema, destructive)."""
    if not sdk_available():
        raise McpError(f"the MCP SDK is not installed ({INSTALL_HINT})")
    return _run_session(spec, {"op": "list"}, timeout)


async def _list_tools(session) -> list[dict[str, Any]]:
    tools, cursor = [], None
    for _ in range(10):  # pages
        if cursor:
            from mcp.types import PaginatedRequestParams  # lazy: optional extra mcp

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
        out.append(
            {
                "name": tool.name,
                "description": tool.description or "",
                "input_schema": schema if isinstance(schema, dict) else {},
                "destructive": not _read_only(annotations),
            }
        )
    return out


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
            check_url(
                spec["url"], resolvable=False
            )  # a clear refusal first; the transport checks every hop
        if spec["transport"] == "stdio" and _gevent_patched():
            return _in_bridge(spec, request, timeout)
        return _in_thread(_session_factory(spec, _action(request)), timeout)
    except McpError:
        raise
    except Exception as exc:
        refused = _refusal(exc)
        log.info("MCP session with server %s failed: %s", spec["id"], _describe(exc))
        if refused is not None:
            raise McpError(
                "that address is refused: private, loopback and other internal addresses are for "
                "administrators only (address_refused)",
                "address_refused",
            ) from None
        raise McpError(UNREACHABLE, "mcp_unreachable") from None


def _gevent_patched() -> bool:
    return monkey.is_module_patched("subprocess")


def _in_bridge(spec: dict[str, Any], request: dict[str, Any], timeout: float) -> Any:
    # The bridge needs Python's own variables, never Numi's settings or provider keys.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NUMI_", "OPENAI_", "ANTHROPIC_"))
        and "KEY" not in k
        and "TOKEN" not in k
        and "SECRET" not in k
        and "PASSWORD" not in k
    }
    payload = json.dumps({"spec": spec, "request": request, "timeout": timeout})
    try:
        done = gsubprocess.run(
            [sys.executable, "-m", "numi.agent.tools.mcp"],
            input=payload.encode(),
            capture_output=True,
            timeout=timeout + 10,
            env=env,
        )
    except gsubprocess.TimeoutExpired:
        raise McpError(
            f"the MCP server did not answer within {timeout:g} s", "mcp_timeout"
        ) from None
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
    job = json.loads(sys.stdin.read())
    try:
        result = asyncio.run(
            asyncio.wait_for(
                _session_factory(job["spec"], _action(job["request"]))(), job["timeout"]
            )
        )
        print(json.dumps({"result": result}))
    except (asyncio.TimeoutError, TimeoutError):
        print(
            json.dumps(
                {
                    "error": f"the MCP server did not answer within {job['timeout']:g} s",
                    "timeout": True,
                }
            )
        )
    except BaseException as exc:  # report, do not crash: the parent reads stdout
        print(json.dumps({"error": _describe(exc)}))


def call_tool(
    spec: dict[str, Any], tool_name: str, arguments: dict[str, Any], timeout: float
) -> str:
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
            parts.append(
                getattr(resource, "text", None) or f"[resource {getattr(resource, 'uri', '')}]"
            )
        else:
            parts.append(f"[{kind or 'content'} omitted]")
    structured = _attr(result, "structured_content", "structuredContent")
    text = (
        "\n".join(parts)
        if parts
        else (json.dumps(structured, ensure_ascii=False) if structured else "")
    )
    return {"text": text, "is_error": bool(_attr(result, "is_error", "isError", default=False))}


def _refusal(failure: BaseException) -> AddressRefused | None:
    """The guard's refusal behind `failure` (anyio and httpx wrap it), if that is what
    failed."""
    seen = 0
    exc: BaseException | None = failure
    while exc is not None and seen < 20:
        if isinstance(exc, AddressRefused):
            return (
                exc if exc.address is not None else None
            )  # "does not resolve" is plain unreachable
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
