"""What a model list says of each model: context size and capabilities, read from the
extras OpenAI-compatible servers add to GET /v1/models, and from llama-server's GET
/props. Shared by every kind: llama-server answers the same list and /props whichever
wire kind (Chat Completions, Responses, Anthropic Messages) an endpoint speaks."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .events import ModelInfo

log = logging.getLogger(__name__)


def with_llama_server_props(
    client: Any, base_url: str, listed: list[Any], info: Callable[[Any], ModelInfo]
) -> list[ModelInfo]:
    """Each listed model as `info` reads it, and, when the list is llama-server's, with
    what its /props says of the loaded template and the allocated context."""
    models = [info(model) for model in listed]
    if any(is_llama_server(model) for model in listed):
        props = llama_server_props(client, base_url)
        if props:
            models = [_with_props(model, props) for model in models]
    return models


def llama_server_props(client: Any, base_url: str) -> dict[str, Any] | None:
    """llama-server's GET /props (at the server's root, beside /v1): the loaded chat
    template's capabilities, its modalities and the context size actually allocated
    (`-c`). None when the server does not answer it. `client` is either SDK's client:
    both have `get(url, cast_to=object)`."""
    parts = urlsplit(base_url)
    url = f"{parts.scheme}://{parts.netloc}/props"
    try:
        props = client.get(url, cast_to=object)
    except Exception as exc:  # an older build without /props: the list alone counts
        log.info("no /props from %s: %s", parts.netloc, type(exc).__name__)
        return None
    return props if isinstance(props, dict) else None


def openai_model_info(model: Any) -> ModelInfo:
    """ModelInfo from an OpenAI-shaped model entry, reading the extras that
    OpenAI-compatible servers add (PROTOCOLS §5): OpenRouter `context_length`,
    `architecture.input_modalities`, `supported_parameters`; vLLM `max_model_len`;
    llama.cpp `meta.n_ctx` (the allocated context, `-c`) before `n_ctx_train`; LM Studio
    `max_context_length`; LiteLLM `max_input_tokens` and its `supports_*` flags."""
    extra: dict[str, Any] = model.model_extra or {}
    meta: dict[str, Any] = extra["meta"] if isinstance(extra.get("meta"), dict) else {}
    context = (
        extra.get("context_length")
        or extra.get("context_window")
        or extra.get("max_model_len")
        or extra.get("max_input_tokens")
        or extra.get("max_context_length")
        or meta.get("n_ctx")
        or meta.get("n_ctx_train")
    )
    vision = tools = reasoning = None
    architecture = extra.get("architecture")
    if isinstance(architecture, dict) and isinstance(architecture.get("input_modalities"), list):
        vision = "image" in architecture["input_modalities"]
    parameters = extra.get("supported_parameters")
    if isinstance(parameters, list):
        tools = "tools" in parameters
        reasoning = "reasoning" in parameters or "include_reasoning" in parameters
    capabilities = extra.get("capabilities")
    if isinstance(capabilities, list):  # Ollama-style ["completion", "vision", "tools", "thinking"]
        vision = "vision" in capabilities
        tools = "tools" in capabilities or "tool_use" in capabilities  # LM Studio: tool_use
        reasoning = "thinking" in capabilities
    # A model list's own flags (LiteLLM's model info) say what the server supports.
    tools = _flag(
        extra, "supports_function_calling", "supports_tool_calls", "supports_tools", tools
    )
    vision = _flag(extra, "supports_vision", vision)
    reasoning = _flag(extra, "supports_reasoning", reasoning)
    return ModelInfo(
        id=model.id,
        display_name=extra.get("name") if isinstance(extra.get("name"), str) else None,
        context_window=_positive(context),
        supports_vision=vision,
        supports_tools=tools,
        supports_reasoning=reasoning,
    )


def _flag(extra: dict[str, Any], *names_then_default: Any) -> bool | None:
    *names, default = names_then_default
    for name in names:
        if isinstance(extra.get(name), bool):
            return extra[name]
    return default


def _positive(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return None


def is_llama_server(model: Any) -> bool:
    """A model entry of llama-server's list (its `owned_by`, or the `meta` it adds)."""
    extra: dict[str, Any] = model.model_extra or {}
    return extra.get("owned_by") == "llamacpp" or isinstance(extra.get("meta"), dict)


def _with_props(model: ModelInfo, props: dict[str, Any]) -> ModelInfo:
    """A llama-server model with what /props says the loaded template and context can
    do, where the list itself said nothing: `chat_template_caps.supports_tool_calls`
    (or, on builds before the caps, whether the template mentions tools at all),
    `modalities.vision`; and the allocated `n_ctx`, which wins over the list's."""
    caps = props.get("chat_template_caps")
    tools = None
    if isinstance(caps, dict):
        tools = _flag(caps, "supports_tool_calls", "supports_tools", None)
    elif isinstance(props.get("chat_template"), str):
        tools = "tools" in props["chat_template"]
    modalities = props.get("modalities")
    vision = modalities.get("vision") if isinstance(modalities, dict) else None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
    return dataclasses.replace(
        model,
        supports_tools=model.supports_tools if model.supports_tools is not None else tools,
        supports_vision=model.supports_vision
        if model.supports_vision is not None
        else (vision if isinstance(vision, bool) else None),
        # The allocated context (-c) counts, not the model's trained one (n_ctx_train).
        context_window=_positive(n_ctx) or model.context_window,
    )
