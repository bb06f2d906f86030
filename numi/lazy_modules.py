"""Feature modules imported on first use, not at start-up (issue 45).

`numi serve` answered its first request only after importing every feature's code: the
/v1 gateway and /mcp, the chat importers, research, the code tool. A start needs none of
them, and their code objects, classes and functions stayed in the idle process's memory
(bench/PROFILE.md, "Start-up, issue 45"); so did nh3's library, the sanitiser's, before
anything was rendered. A module that imports such a feature at its top
names it through `lazy_module` instead, beside the real import for the type checker:

    if TYPE_CHECKING:
        from ..gateway import relay
    else:
        relay = lazy_module("numi.gateway.relay")

`relay.Relay(...)` then imports numi.gateway.relay on its first call, once per process.
This is the one mechanism for it (not imports scattered inside functions); the features
loaded this way are listed in `LAZY_AT_START` and tests/test_start_modules.py checks that
none of them is loaded once an app is made.
"""

from __future__ import annotations

import importlib
from typing import Any

# The packages and modules no start-up imports (checked by tests/test_start_modules.py).
LAZY_AT_START = (
    "numi.agent.research",
    "numi.agent.research_prompts",
    "numi.agent.tools.code.kernels",
    "numi.agent.tools.code.outputs",
    "numi.agent.tools.code.sandbox",
    "numi.chat.import_formats",
    "numi.chat.importer",
    "numi.chat.importers",
    "numi.chat.import_stream",
    "numi.gateway.inbound",
    "numi.gateway.mcp_ask",
    "numi.gateway.mcp_tools",
    "numi.gateway.outbound",
    "numi.gateway.relay",
    "numi.gateway.responses",
    "numi.gateway.spending",
    "numi.gateway.threads",
    "numi.web.import_json",
    "numi.web.import_worker",
    "nh3",  # the sanitiser's library: loaded by the first render (numi/render/sanitize.py)
)


class LazyModule:
    """A stand-in for the module `name`: the first attribute read imports it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attribute: str) -> Any:
        # Only for names that are not slots: everything the module itself has.
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r}, {state}>"


def lazy_module(name: str) -> Any:
    """The module `name` (absolute), imported when one of its names is first used."""
    return LazyModule(name)
