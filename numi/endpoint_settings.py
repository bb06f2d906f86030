"""An endpoint's own settings (Endpoint.settings_json), checked: the user's say over
what the server reports. `retries` (False: one attempt per call, for an endpoint behind
a gateway that retries itself) and `model_capabilities` (per model id: tools, vision,
reasoning on or off, and a context size; unset means "as the server says"), `redaction` (the
privacy gateway's rules, checked by `numi.redaction.check_rules`) and `prompt_caching`
(False: no Anthropic cache breakpoints)."""

from __future__ import annotations

from typing import Any

from .errors import invalid

# The endpoint's settings (Endpoint.settings_json) that validate() accepts.
SETTINGS_FIELDS = ("retries", "model_capabilities", "redaction", "prompt_caching")
CAPABILITY_FLAGS = ("tools", "vision", "reasoning")
MAX_CAPABILITY_MODELS = 200


def model_capabilities_input(value: Any) -> dict[str, dict[str, Any]]:
    """Per-model overrides {model id: {"tools"|"vision"|"reasoning": bool or null,
    "context_window": a token count or null}}; null (or leaving a field out) means "as
    the server says, else assumed". Models left with nothing set are dropped."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_CAPABILITY_MODELS:
        raise invalid(
            f"model_capabilities must map at most {MAX_CAPABILITY_MODELS} model ids to "
            "their settings.",
            "invalid_capabilities",
        )
    clean: dict[str, dict[str, Any]] = {}
    for model, settings in value.items():
        if not isinstance(model, str) or not model.strip() or len(model) > 200:
            raise invalid(
                "model_capabilities: a model id is 1 to 200 characters.", "invalid_capabilities"
            )
        if not isinstance(settings, dict) or set(settings) - {*CAPABILITY_FLAGS, "context_window"}:
            raise invalid(
                f"model_capabilities[{model[:40]!r}] may set only "
                f"{', '.join(CAPABILITY_FLAGS)} and context_window.",
                "invalid_capabilities",
            )
        entry: dict[str, Any] = {}
        for name in CAPABILITY_FLAGS:
            if settings.get(name) is not None:
                if not isinstance(settings[name], bool):
                    raise invalid(
                        f"model_capabilities[{model[:40]!r}].{name} must be true, false or null.",
                        "invalid_capabilities",
                    )
                entry[name] = settings[name]
        window = settings.get("context_window")
        if window is not None:
            if (
                not isinstance(window, int)
                or isinstance(window, bool)
                or not 256 <= window <= 10_000_000
            ):
                raise invalid(
                    f"model_capabilities[{model[:40]!r}].context_window must be a token count "
                    "from 256 to 10,000,000, or null.",
                    "invalid_capabilities",
                )
            entry["context_window"] = window
        if entry:
            clean[model.strip()] = entry
    return clean


def capabilities_from_form(models: list[str], tools: list[str], contexts: list[str]) -> dict:
    """The Edit form's per-model rows (parallel lists, in order) as `model_capabilities`
    input: an empty choice means "as reported"; validate() checks the values."""
    if not (len(models) == len(tools) == len(contexts)):
        raise invalid("The per-model settings arrived incomplete.", "invalid_capabilities")
    out: dict[str, dict[str, Any]] = {}
    for model, tool, context in zip(models, tools, contexts, strict=True):
        entry: dict[str, Any] = {}
        if tool in ("0", "1"):
            entry["tools"] = tool == "1"
        elif tool:
            raise invalid(
                f"Tools for {model[:40]!r} must be on, off or as reported.", "invalid_capabilities"
            )
        if context.strip():
            try:
                entry["context_window"] = int(context.strip().replace(",", ""))
            except ValueError:
                raise invalid(
                    f"The context size of {model[:40]!r} must be a whole number of tokens.",
                    "invalid_capabilities",
                ) from None
        out[model] = entry
    return out
