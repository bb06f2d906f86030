"""The MCP server store: a user's McpServer rows (owner-scoped), their validation, and the
per-app cache of each server's tool list."""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select

from ....addresses import AddressRefused, check_url
from ....setting_values import parse_bool
from ....crypto import SecretUnreadable, seal, unseal
from ....errors import NumiError, invalid
from ....extensions import db
from ....services import services
from ....models import McpServer, utcnow

log = logging.getLogger(__name__)
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
INSTALL_HINT = "pip install 'numi[mcp]'"


# Installed packages do not change while the process runs, and find_spec stats the import path.
@functools.cache
def sdk_available() -> bool:
    """Whether the optional `mcp` SDK is installed."""
    return importlib.util.find_spec("mcp") is not None


# --- servers (owner-scoped) ----------------------------------------------------------------


def list_servers(user_id: int) -> list[McpServer]:
    return list(
        db.session.execute(
            select(McpServer)
            .where(McpServer.user_id == user_id, McpServer.deleted_at.is_(None))
            .order_by(McpServer.id)
        ).scalars()
    )


def get_server(user_id: int, server_id: int) -> McpServer:
    """One of this user's servers; a foreign or deleted id is a 404."""
    server = db.session.get(McpServer, server_id)
    if server is None or server.user_id != user_id or server.deleted_at is not None:
        raise NumiError("not_found", "No such MCP server.", 404)
    return server


def create_server(user_id: int, is_admin: bool, data: dict[str, Any]) -> McpServer:
    """Validate and add a server. Every bad field is a 400 with a stable code; nothing is saved."""
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name.strip()):
        raise invalid(
            "The name must be 1–32 lowercase letters, digits, '-' or '_' (it prefixes the tool names).",
            "invalid_name",
        )
    name = name.strip()
    if any(s.name == name for s in list_servers(user_id)):
        raise NumiError("duplicate_name", f"You already have an MCP server named {name!r}.", 409)
    transport = data.get("transport") or "http"
    server = McpServer(
        user_id=user_id,
        name=name,
        transport=transport,
        always_approve=parse_bool(data.get("always_approve")),
        enabled=True,
    )
    if transport == "http":
        url = data.get("url")
        url = url if isinstance(url, str) else ""  # not text: refused below, as no URL
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 500:
            raise invalid(
                "The URL must be an http:// or https:// address (at most 500 characters).",
                "invalid_url",
            )
        if not is_admin:
            try:
                check_url(url.strip(), resolvable=False)
            except AddressRefused as exc:
                log.info("MCP server URL of user %s refused: %s", user_id, exc)
                raise exc.to_error() from None
        server.url = url.strip()
    elif transport == "stdio":
        if not is_admin:
            raise NumiError(
                "forbidden",
                "Only an administrator can add a stdio MCP server (it runs a program on the server).",
                403,
            )
        command = data.get("command")
        if not isinstance(command, str) or not command.strip() or len(command) > 500:
            raise invalid("Give the command that starts the server.", "invalid_command")
        server.command = command.strip()
        server.args = _string_list(data.get("args"), "args")
        env = data.get("env") or {}
        if isinstance(env, str):
            env = _env_lines(env)
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
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


def unsealed_env(server: McpServer) -> dict[str, str]:
    """A stdio server's environment in clear (values stored by older versions are clear)."""
    try:
        return {name: unseal(value) for name, value in (server.env or {}).items()}
    except SecretUnreadable:
        raise NumiError(
            "mcp_env_unreadable",
            f"The environment of MCP server {server.name!r} cannot be read with "
            "this server's secret key (NUMI_SECRET_KEY changed?). Enter it again.",
            409,
        ) from None


def remove_server(server: McpServer) -> None:
    server.deleted_at = utcnow()
    db.session.commit()
    forget_tools(server.id)


def server_dict(server: McpServer) -> dict[str, Any]:
    return {
        "id": server.id,
        "name": server.name,
        "transport": server.transport,
        "url": server.url,
        "command": server.command,
        "args": server.args,
        "enabled": server.enabled,
        "always_approve": server.always_approve,
    }


# The tool lists of each server, cached per app: the catalog fills it, removal empties it.


def tool_cache() -> dict[int, Any]:
    """Server id -> its catalog.ToolList (tools known, refreshing, failing), for this app."""
    return services().mcp_tools


def forget_tools(server_id: int) -> None:
    """Drop a server's cached tool list (it was removed or changed)."""
    services().mcp_tools.pop(server_id, None)
