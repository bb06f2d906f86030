"""What an answer cut short spent: the usage of a stopped or broken stream.

A provider bills the prompt it read and the tokens it sent even when the answer is
stopped or its stream breaks, but it reports usage only at the end of a stream, which a
cut answer never reaches. So the answer's usage is what the provider reported, and what
it did not report is estimated: the request's prompt as the turn estimated it (calibrated
for the model) and the output from the text, reasoning and tool calls that arrived. The
usage is then marked `estimated`, so the usage page counts it and says so, and no
calibration takes its prompt count for a server's (`agent/calibration.py`).
"""

from __future__ import annotations

import dataclasses

from typing import Any

from ..chat.token_estimate import text_tokens
from ..chat.usage import cache_discount, model_prices


def cut_short_usage(
    reported: dict[str, Any] | None, prompt_tokens: int, result: Any
) -> dict[str, Any]:
    """The usage of an answer cut short: `reported` (the provider's, or None) completed
    with estimates for what it lacks; `prompt_tokens` is the request's estimate, `result`
    the step's result (its content, reasoning and tool calls)."""
    usage = dict(reported or {})
    output = (
        text_tokens(result.content)
        + text_tokens(result.reasoning)
        + sum(text_tokens(call.arguments_json or "") for call in result.tool_calls)
    )
    estimated = False
    if not isinstance(usage.get("input_tokens"), int):
        usage["input_tokens"] = prompt_tokens
        estimated = True
    if not isinstance(usage.get("output_tokens"), int) or usage["output_tokens"] < output:
        usage["output_tokens"] = output
        estimated = True
    if estimated:
        usage["estimated"] = True
    return usage


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A stream's `Usage` as an answer's meta keeps it (unreported counts left out)."""
    if usage is None:
        return None
    return {k: v for k, v in dataclasses.asdict(usage).items() if v is not None}


def cache_saving(user_id: int, model: str, cached_tokens: int | None) -> float | None:
    """What reading `cached_tokens` from the provider's prompt cache saved against the
    model's input price (Usage → prices), or None without a price or a cache read."""
    if not cached_tokens:
        return None
    price = model_prices(user_id).get(model)
    if price is None or not price.input_per_mtok:
        return None
    return round(cached_tokens / 1e6 * price.input_per_mtok * cache_discount(model), 6)


def usage_cached(usage: Any) -> int | None:
    """The prompt tokens a stream's `Usage` says were read from the provider's cache."""
    return getattr(usage, "cached_input_tokens", None)
