"""The registry of endpoint kinds: one row per wire protocol Numi can speak.

A kind names its adapter class (imported only when first used, so `import numi.providers`
stays light), the label the settings page shows, and the SDK module its adapter imports
(start-up imports it off the gevent hub). The built-in kinds register here through the same
`register(app)` hook a NUMI_PLUGINS module uses (`numi.providers.default_kinds`), as
simonw/llm registers its OpenAI models as a default plugin; a plugin adds a kind with
`register_kind(EndpointKind(...))`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .base import ProviderAdapter
from .errors import ProviderError


@dataclass(frozen=True)
class EndpointKind:
    """One wire protocol. `adapter` is "module:ClassName" or a callable returning the class."""

    name: str
    label: str
    adapter: str | Callable[[], type[ProviderAdapter]]
    sdk_module: str | None = None

    def adapter_class(self) -> type[ProviderAdapter]:
        """The adapter class (imported on first use)."""
        if callable(self.adapter):
            return self.adapter()
        module, _, attribute = self.adapter.partition(":")
        return getattr(importlib.import_module(module), attribute)


_KINDS: dict[str, EndpointKind] = {}


def register_kind(kind: EndpointKind) -> EndpointKind:
    """Add (or replace, by name) an endpoint kind; registering the same kind again is a no-op."""
    _KINDS[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Remove a kind (a plugin unloaded, a test done); an unknown name is a no-op."""
    _KINDS.pop(name, None)


def get_kind(name: str) -> EndpointKind:
    """The kind called `name`. Raises ProviderError("bad_request") for an unknown kind."""
    found = _KINDS.get(name)
    if found is None:
        raise ProviderError(
            "bad_request", f"Unknown endpoint kind {name!r}; expected one of {', '.join(_KINDS)}"
        )
    return found


def all_kinds() -> list[EndpointKind]:
    """Every registered kind, built-ins first, in the order they were registered."""
    return list(_KINDS.values())


def kind_names() -> tuple[str, ...]:
    """The names of every registered kind."""
    return tuple(_KINDS)
