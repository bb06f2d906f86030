"""Which tools a model call offers, and why a turn left them out.

A model gets the turn's tools unless its capabilities say it cannot call them (the user's
per-model setting on the endpoint, else what the server reports: a model list's fields or
llama-server's /props, else the family table; see providers/capabilities.py). Leaving
them out is never silent: the turn says so (`tools_omitted`) with the reason, so a user
whose model answers with `<tool_call>…` text knows where to turn them on.

A server that refuses tools for a model (Ollama's "does not support tools", llama-server
started without --jinja) is asked again once without them, and the turn says that too.
So does a request that fits a small known window only without its tools
(`ContextWindow`: the omission notice goes first, then the tools, then the question is
refused).
"""

from __future__ import annotations

from typing import Any

# What a server answers (HTTP 400/500 before any output) when a model cannot take tools.
_REFUSAL_MARKERS = (
    "does not support tools",
    "does not support tool",
    "tools param requires --jinja",
    "tool use is not supported",
    "tools are not supported",
    "tool calling is not supported",
    "does not support function calling",
)

_REASONS = {
    "override": "tools are turned off for {model} in the endpoint's settings",
    "reported": "the server says {model} cannot call tools",
    "family": "{model} is assumed not to call tools (turn them on in the endpoint's settings)",
    "default": "{model} is assumed not to call tools (turn them on in the endpoint's settings)",
    "refused": "the server refused tools for {model}: {detail}",
    "window": "with them this request would not fit {model}'s context window",
}


def omission(model: str, source: str, count: int, detail: str = "") -> dict[str, Any]:
    """The `tools_omitted` event's data: why `count` tools were left out of a call to
    `model`. `source` is where the decision came from: override, reported, family,
    default (capabilities' sources), refused (the server said no) or window (they did
    not fit the model's context window)."""
    text = _REASONS.get(source, _REASONS["default"]).format(model=model, detail=detail[:200])
    return {"model": model, "source": source, "count": count, "message": f"Tools left out: {text}."}


def refused_tools(error: Any) -> bool:
    """Whether a failure before any output is the server refusing tools for the model."""
    if error is None or getattr(error, "after_output", False):
        return False
    if error.code not in ("bad_request", "provider_unavailable"):
        return False
    message = (error.message or "").lower()
    return any(marker in message for marker in _REFUSAL_MARKERS)
