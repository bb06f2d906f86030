"""Provider adapters: one per wire protocol, behind one neutral interface.

    adapter = get_adapter("anthropic", "https://api.anthropic.com", key)
    for event in adapter.stream(ChatRequest(model=..., messages=...)):
        ...   # TextDelta, ReasoningDelta, ToolCallDelta, ToolCallComplete, Usage,
              # then exactly one Finish or StreamError

Importing this package is cheap: the openai and anthropic SDKs are imported only when
an adapter first builds its client (a stream or a model listing).
"""

from __future__ import annotations

from typing import Any

from .base import ProviderAdapter, ProviderStream, RetryPolicy
from .capabilities import Capabilities, capabilities
from .default_kinds import register as _register_default_kinds
from .errors import ProviderError
from .events import (
    ChatRequest,
    Finish,
    ModelInfo,
    ReasoningDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from .kinds import EndpointKind, all_kinds, get_kind, kind_names, register_kind

_register_default_kinds()
# The built-in kinds' names (a plugin's kinds are in kind_names()).
KINDS = kind_names()


def adapter_class(kind: str) -> type[ProviderAdapter]:
    """The adapter class for an endpoint kind (its capability attributes are readable
    without building a client). Raises ProviderError("bad_request") for unknown kinds."""
    return get_kind(kind).adapter_class()


def get_adapter(kind: str, base_url: str, api_key: str | None, **options: Any) -> ProviderAdapter:
    """An adapter for an endpoint of `kind`; `options` (timeouts, retries, transport) are
    the adapter's own, listed once on `ProviderAdapter.__init__`."""
    return adapter_class(kind)(base_url, api_key, **options)


__all__ = [
    "KINDS",
    "Capabilities",
    "ChatRequest",
    "EndpointKind",
    "Finish",
    "ModelInfo",
    "ProviderAdapter",
    "ProviderError",
    "ProviderStream",
    "ReasoningDelta",
    "RetryPolicy",
    "StreamError",
    "StreamEvent",
    "TextDelta",
    "ToolCallComplete",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "adapter_class",
    "all_kinds",
    "capabilities",
    "get_adapter",
    "get_kind",
    "kind_names",
    "register_kind",
]
