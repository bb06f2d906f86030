"""The built-in endpoint kinds, registered as a default plugin (see numi.providers.kinds).

`numi.providers` registers them on import, so adapters work without an app (tests,
benchmarks); `create_app` calls `register(app)` again with the NUMI_PLUGINS modules, which
changes nothing.
"""

from __future__ import annotations

from typing import Any

from .kinds import EndpointKind, register_kind

BUILT_IN = (
    EndpointKind(
        "openai_chat",
        "OpenAI-compatible (Chat Completions)",
        "numi.providers.openai_chat:OpenAIChatAdapter",
        "openai",
    ),
    EndpointKind(
        "openai_responses",
        "OpenAI Responses",
        "numi.providers.openai_responses:OpenAIResponsesAdapter",
        "openai",
    ),
    EndpointKind(
        "anthropic",
        "Anthropic Messages",
        "numi.providers.anthropic_messages:AnthropicAdapter",
        # Sent by Numi's own wire code on httpx2, not the anthropic SDK (issue 45).
        "numi.providers.anthropic_wire",
    ),
)


def register(app: Any = None) -> None:
    """The NUMI_PLUGINS hook: register the built-in kinds."""
    for kind in BUILT_IN:
        register_kind(kind)
