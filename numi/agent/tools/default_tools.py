"""The tools Numi ships with, registered as a default plugin.

`create_app` loads this module first, then the NUMI_PLUGINS modules, and calls each one's
`register(app)`: the built-in tools reach the app's registry by the same path a plugin's
tools do (as simonw/llm registers its OpenAI models as a default plugin).
"""

from __future__ import annotations

from typing import Any

from ...services import services
from .bash import BASH
from .code import code_tool, extra_installed
from .clock import CURRENT_TIME
from .documents import SEARCH_DOCUMENTS
from .mcp import configure_pool, provide_tools
from .memory import REMEMBER
from .web import FETCH_PAGE, WEB_SEARCH
from .workspace import WORKSPACE_TOOLS


def register(app: Any) -> None:
    """The NUMI_PLUGINS hook: the built-in tools, and the provider of each user's MCP tools."""
    registry = services(app).tools
    for tool in (
        CURRENT_TIME,
        WEB_SEARCH,
        FETCH_PAGE,
        *WORKSPACE_TOOLS,
        BASH,
        SEARCH_DOCUMENTS,
        REMEMBER,
    ):
        registry.register(tool)
    if extra_installed():  # else Settings says how to install it (numi[code])
        registry.register(code_tool(app.config))
    registry.add_provider(provide_tools)  # each user's MCP servers' tools, per turn
    configure_pool(app.config["NUMI_MCP_THREADS"])
