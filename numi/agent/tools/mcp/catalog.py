"""The catalog of each MCP server's tools: what is known, refreshed in the background.

A page never opens an MCP session: it reads what the catalog knows and, when the list is
stale, starts one refresh greenlet (one per server at a time, whoever asks). A failure is
kept too, with back-off (NUMI_MCP_RETRY_SECONDS doubling to NUMI_MCP_RETRY_MAX_SECONDS),
so a failing or hanging server is tried once per back-off period, not once per page load.
A turn that needs a server's tools and has none known joins the refresh (at most
NUMI_MCP_TIMEOUT_SECONDS, its own user's wait); a server in back-off is skipped at once.

The refresh greenlet takes plain specs and config values, never ORM rows or the app
context; the session itself runs in the bridge's own thread pool.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import gevent
from flask import current_app

from ....models import McpServer
from .bridge import McpError, fetch_tools
from .store import tool_cache, unsealed_env

log = logging.getLogger(__name__)


@dataclass
class ToolList:
    """One server's entry: its tools when last listed, and its failures since."""

    tools: list[dict[str, Any]] | None = None
    listed_at: float | None = None  # time.monotonic() of the last good listing
    failed_since: datetime | None = None  # the first failure of the current run, for the page
    error: str = ""
    error_code: str = ""
    backoff: float = 0.0
    retry_at: float = 0.0  # time.monotonic(): no new try before this
    refresh: gevent.Greenlet | None = field(default=None, repr=False)


def server_spec(server: McpServer, guarded: bool = False) -> dict[str, Any]:
    """The plain values a session needs: the thread must not touch the ORM object."""
    return {
        "id": server.id,
        "transport": server.transport,
        "url": server.url,
        "command": server.command,
        "args": server.args,
        "env": unsealed_env(server),
        "guarded": guarded and server.transport == "http",
    }


def entry(server_id: int) -> ToolList:
    """The server's catalog entry in this app (an empty one when never listed)."""
    return tool_cache().setdefault(server_id, ToolList())


def _settings() -> dict[str, float]:
    config = current_app.config
    return {
        "timeout": float(config["NUMI_MCP_TIMEOUT_SECONDS"]),
        "fresh": float(config["NUMI_MCP_TOOLS_CACHE_SECONDS"]),
        "retry": float(config["NUMI_MCP_RETRY_SECONDS"]),
        "retry_max": float(config["NUMI_MCP_RETRY_MAX_SECONDS"]),
    }


def _due(item: ToolList, fresh: float) -> bool:
    now = time.monotonic()
    if item.refresh is not None or now < item.retry_at:
        return False
    return item.listed_at is None or now - item.listed_at >= fresh


def _start(item: ToolList, spec: dict[str, Any], settings: dict[str, float]) -> gevent.Greenlet:
    """The one refresh of this server (a running one is reused)."""
    if item.refresh is None:
        item.refresh = gevent.spawn(_refresh, item, spec, settings)
    return item.refresh


def _refresh(item: ToolList, spec: dict[str, Any], settings: dict[str, float]) -> None:
    try:
        tools = fetch_tools(spec, settings["timeout"])
    except McpError as exc:
        item.failed_since = item.failed_since or datetime.now(UTC)
        item.error, item.error_code = str(exc), exc.code
        item.backoff = min(
            settings["retry_max"], item.backoff * 2 if item.backoff else settings["retry"]
        )
        item.retry_at = time.monotonic() + item.backoff
        log.info(
            "MCP server %s: listing its tools failed (%s); next try in %g s",
            spec["id"],
            exc.code,
            item.backoff,
        )
    except Exception:  # a bug must not leave the entry "refreshing" forever
        log.exception("MCP server %s: listing its tools failed", spec["id"])
        item.backoff = min(
            settings["retry_max"], item.backoff * 2 if item.backoff else settings["retry"]
        )
        item.retry_at = time.monotonic() + item.backoff
    else:
        item.tools, item.listed_at = tools, time.monotonic()
        item.failed_since, item.error, item.error_code, item.backoff, item.retry_at = (
            None,
            "",
            "",
            0.0,
            0.0,
        )
    finally:
        item.refresh = None


def cached_tools(server: McpServer, *, guarded: bool) -> list[dict[str, Any]]:
    """What is known of the server's tools, at once (pages); a stale list starts a refresh."""
    item, settings = entry(server.id), _settings()
    if _due(item, settings["fresh"]):
        _start(item, server_spec(server, guarded), settings)
    return item.tools or []


def tools_for_turn(server: McpServer, *, guarded: bool) -> list[dict[str, Any]]:
    """The server's tools for a turn: the known list (refreshed in the background when stale),
    else the refresh joined for at most the MCP time limit. A server in back-off after a
    failure raises its last McpError at once."""
    item, settings = entry(server.id), _settings()
    if _due(item, settings["fresh"]):
        _start(item, server_spec(server, guarded), settings)
    if item.tools is not None:
        return item.tools
    if item.refresh is not None:
        item.refresh.join(settings["timeout"] + 5)  # the session's own limit fires first
    if item.tools is not None:
        return item.tools
    raise McpError(
        item.error or "the MCP server's tools are not known yet",
        item.error_code or "mcp_unreachable",
    )


def refresh_now(server: McpServer, *, guarded: bool) -> list[dict[str, Any]]:
    """List the tools now, back-off or not (the settings page's Test button); waits at most
    the MCP time limit and raises McpError when the listing failed."""
    item, settings = entry(server.id), _settings()
    before = item.listed_at
    item.retry_at = 0.0
    _start(item, server_spec(server, guarded), settings).join(settings["timeout"] + 5)
    if item.listed_at is not None and item.listed_at != before:
        return item.tools or []
    raise McpError(
        item.error or "the MCP server did not answer", item.error_code or "mcp_unreachable"
    )


def state(server_id: int) -> dict[str, Any]:
    """The server's state for a page: `known` (with `count`), `refreshing`, `unreachable`
    (with `since`, UTC text, and the stable `code`), or `unknown` (never listed yet)."""
    item = tool_cache().get(server_id) or ToolList()
    if item.failed_since is not None and item.refresh is None:
        return {
            "state": "unreachable",
            "since": item.failed_since.strftime("%Y-%m-%d %H:%M:%S UTC"),
            "code": item.error_code,
            "retry_in": max(0, round(item.retry_at - time.monotonic())),
            "count": len(item.tools or []),
        }
    if item.refresh is not None:
        return {"state": "refreshing", "count": len(item.tools or [])}
    if item.tools is not None:
        return {"state": "known", "count": len(item.tools)}
    return {"state": "unknown", "count": 0}
