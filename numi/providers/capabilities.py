"""What a model can do: vision, tools, reasoning, context window.

Each field is decided by the first source that knows it:

1. ``overrides``: the user's explicit per-model settings (a user who says a model sees
   images knows better than our table);
2. ``reported``: what the endpoint's model list said (OpenRouter, llama.cpp, vLLM,
   Anthropic and Ollama report some of these);
3. the table of known model families below (a guess by name: it never outranks what a
   server reports, and it leaves tools unsaid where the name proves nothing);
4. ``defaults`` (the user's endpoint-level settings), else the built-in defaults.

``Capabilities.sources`` says where each value came from, so the UI can say "assumed"
rather than silently offering what a model may not do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .events import ModelInfo

FIELDS = ("vision", "tools", "reasoning", "context_window")

BUILTIN_DEFAULTS: dict[str, Any] = {
    "vision": False,
    "tools": True,  # most current models call tools; a failure is reported, not hidden
    "reasoning": False,
    "context_window": None,
}


@dataclass(frozen=True)
class Capabilities:
    vision: bool
    tools: bool
    reasoning: bool
    context_window: int | None
    # field -> "override" | "reported" | "family" | "default"
    sources: dict[str, str] = field(default_factory=dict, compare=False)


def _family(pattern: str, **values: Any) -> tuple[re.Pattern[str], dict[str, Any]]:
    return re.compile(pattern), values


# First match wins: specific patterns come before general ones. Matched against the model
# id lower-cased, without a vendor prefix ("openai/", "anthropic/") or an Ollama tag.
KNOWN_FAMILIES = [
    _family(r"^gpt-5", vision=True, tools=True, reasoning=True, context_window=400_000),
    _family(r"^gpt-4\.1", vision=True, tools=True, reasoning=False, context_window=1_047_576),
    _family(
        r"^(chatgpt-)?gpt-4o|^chatgpt-4o",
        vision=True,
        tools=True,
        reasoning=False,
        context_window=128_000,
    ),
    _family(r"^gpt-4-turbo", vision=True, tools=True, reasoning=False, context_window=128_000),
    _family(r"^gpt-4", vision=False, tools=True, reasoning=False, context_window=8_192),
    _family(r"^gpt-3\.5", vision=False, tools=True, reasoning=False, context_window=16_385),
    _family(r"^gpt-oss", vision=False, tools=True, reasoning=True, context_window=131_072),
    _family(r"^o1-mini", vision=False, tools=False, reasoning=True, context_window=128_000),
    _family(r"^o3-mini", vision=False, tools=True, reasoning=True, context_window=200_000),
    _family(r"^o[134]\b|^o[134]-", vision=True, tools=True, reasoning=True, context_window=200_000),
    _family(
        r"^claude-3-(5-)?haiku|^claude-3-(opus|sonnet)|^claude-3-5",
        vision=True,
        tools=True,
        reasoning=False,
        context_window=200_000,
    ),
    _family(r"^claude", vision=True, tools=True, reasoning=True, context_window=200_000),
    _family(r"^gemini", vision=True, tools=True, reasoning=True, context_window=1_048_576),
    _family(
        r"^deepseek-reasoner", vision=False, tools=True, reasoning=True, context_window=128_000
    ),
    _family(r"^deepseek-r1", vision=False, tools=False, reasoning=True, context_window=128_000),
    _family(r"^deepseek", vision=False, tools=True, reasoning=False, context_window=128_000),
    _family(r"^(qwen.*-?vl|qvq)", vision=True, tools=True, reasoning=False, context_window=32_768),
    _family(r"^(qwq|qwen3)", vision=False, tools=True, reasoning=True, context_window=40_960),
    _family(r"^qwen", vision=False, tools=True, reasoning=False, context_window=32_768),
    _family(
        r"^(llava|bakllava|moondream|minicpm-v)|llama-?3\.2-?.*vision",
        vision=True,
        tools=False,
        reasoning=False,
        context_window=None,
    ),
    _family(r"^llama-?4", vision=True, tools=True, reasoning=False, context_window=131_072),
    _family(
        r"^(meta-)?llama-?3\.[123]",
        vision=False,
        tools=True,
        reasoning=False,
        context_window=131_072,
    ),
    # No tools verdict: "llama" starts gateway aliases and llama.cpp names of any model
    # ("llama-tool", "llamacpp-qwen3", "llama3-groq-tool-use"); whether tools work is the
    # server's chat template's to say (/props), and a refusal is retried without them.
    _family(r"^(meta-)?llama", vision=False, reasoning=False, context_window=8_192),
    _family(r"^gemma-?3", vision=True, tools=False, reasoning=False, context_window=131_072),
    _family(r"^gemma", vision=False, tools=False, reasoning=False, context_window=8_192),
    _family(
        r"^(pixtral|mistral-small-?3\.[12]|mistral-medium)",
        vision=True,
        tools=True,
        reasoning=False,
        context_window=128_000,
    ),
    _family(r"^(magistral)", vision=False, tools=True, reasoning=True, context_window=40_000),
    _family(
        r"^(mistral|mixtral|ministral|codestral|devstral)",
        vision=False,
        tools=True,
        reasoning=False,
        context_window=32_768,
    ),
    _family(r"^phi-?4", vision=False, tools=False, reasoning=False, context_window=16_384),
    _family(
        r"^(kimi|glm-4\.[5-9]|minimax-m)",
        vision=False,
        tools=True,
        reasoning=True,
        context_window=131_072,
    ),
]


def family_capabilities(model_id: str) -> dict[str, Any]:
    """The table's entry for a model id, or {} when the family is unknown."""
    name = model_id.lower().rsplit("/", 1)[-1].split(":", 1)[0]
    for pattern, values in KNOWN_FAMILIES:
        if pattern.search(name):
            return values
    return {}


def capabilities(
    model_id: str,
    reported: ModelInfo | None = None,
    overrides: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Capabilities:
    """Resolve a model's capabilities (see the module docstring for the order)."""
    reported_values: dict[str, Any] = {}
    if reported is not None:
        reported_values = {
            "vision": reported.supports_vision,
            "tools": reported.supports_tools,
            "reasoning": reported.supports_reasoning,
            "context_window": reported.context_window,
        }
    layers = [
        ("override", overrides or {}),
        ("reported", reported_values),
        ("family", family_capabilities(model_id)),
        ("default", defaults or {}),
        ("default", BUILTIN_DEFAULTS),
    ]
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in FIELDS:
        for source, layer in layers:
            if layer.get(name) is not None:
                values[name], sources[name] = layer[name], source
                break
        else:
            values[name], sources[name] = None, "default"
    return Capabilities(
        vision=bool(values["vision"]),
        tools=bool(values["tools"]),
        reasoning=bool(values["reasoning"]),
        context_window=values["context_window"],
        sources=sources,
    )


REPORTED_FIELDS = ("context_window", "supports_vision", "supports_tools", "supports_reasoning")


def listed_capabilities(
    model_id: str, models: list[Any] | None, overrides: dict[str, Any] | None = None
) -> Capabilities:
    """A model's capabilities, with what an endpoint's stored model list (dicts of
    ModelInfo's fields, as the endpoint reported them) says of it, under the user's
    `overrides` for it (the endpoint's per-model settings)."""
    listed = next(
        (m for m in models or () if isinstance(m, dict) and m.get("id") == model_id), None
    )
    reported = (
        ModelInfo(id=model_id, **{k: listed.get(k) for k in REPORTED_FIELDS}) if listed else None
    )
    return capabilities(model_id, reported, overrides)
