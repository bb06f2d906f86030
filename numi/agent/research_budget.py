"""A research run's budget: most steps, most pages read, most tokens, a time limit, and
optionally most cost.

A send in research mode (`"mode": "research"`) may carry `research: {max_steps, max_pages,
max_tokens, time_limit_seconds, max_cost}`; each whole-number field it leaves out takes its
default from the settings (`NUMI_RESEARCH_MAX_*`, `NUMI_RESEARCH_TIME_LIMIT_SECONDS`). A field
that is not a whole number of at least 1 is refused (`research_budget_invalid`), one above
the administrator's limit (`NUMI_RESEARCH_LIMIT_*`) too (`research_budget_over_limit`), before
anything is saved. `max_cost` is in the currency of the user's prices (Usage: per million
tokens, as the Usage page counts cost); left out, the run has no cost limit. It must be a
number above 0 (`research_budget_invalid`), at most `NUMI_RESEARCH_LIMIT_COST`
(`research_budget_over_limit`); that the model has a price is checked with the route
(`research_cost_unpriced`, numi/agent/research.py). No database here: it is read at the
edge with the rest of the `Send`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import NumiError, invalid

# field -> (its default's setting, the administrator's limit's setting)
FIELDS = {
    "max_steps": ("NUMI_RESEARCH_MAX_STEPS", "NUMI_RESEARCH_LIMIT_STEPS"),
    "max_pages": ("NUMI_RESEARCH_MAX_PAGES", "NUMI_RESEARCH_LIMIT_PAGES"),
    "max_tokens": ("NUMI_RESEARCH_MAX_TOKENS", "NUMI_RESEARCH_LIMIT_TOKENS"),
    "time_limit_seconds": ("NUMI_RESEARCH_TIME_LIMIT_SECONDS", "NUMI_RESEARCH_LIMIT_SECONDS"),
}
COST = "max_cost"
NAMES = (*FIELDS, COST)
MODES = ("chat", "research")
# A scheduled task whose tools name this runs each time as a research run (numi/tasks/runs.py).
RESEARCH_TOOL = "research"


@dataclass(frozen=True)
class ResearchBudget:
    max_steps: int
    max_pages: int
    max_tokens: int
    time_limit_seconds: int
    max_cost: float | None = None  # None: no cost limit

    @classmethod
    def defaults(cls, config: Any) -> ResearchBudget:
        """The settings' budget (each default held to its limit; no cost limit)."""
        return cls(**{name: min(config[d], config[limit]) for name, (d, limit) in FIELDS.items()})

    @classmethod
    def from_payload(cls, value: Any, config: Any) -> ResearchBudget:
        """A send's `research` field over the defaults; raises NumiError, changes nothing."""
        if value in (None, ""):
            value = {}
        if not isinstance(value, dict):
            raise invalid(
                "research must be an object: {max_steps, max_pages, max_tokens, "
                "time_limit_seconds, max_cost}.",
                "research_budget_invalid",
            )
        unknown = sorted(set(value) - set(NAMES))
        if unknown:
            raise invalid(
                f"research has no field {unknown[0]!r}; it takes {', '.join(NAMES)}.",
                "research_budget_invalid",
            )
        fields = asdict(cls.defaults(config))
        for name, given in value.items():
            if given in (None, ""):
                continue
            if name == COST:
                fields[COST] = _cost(given, config["NUMI_RESEARCH_LIMIT_COST"])
                continue
            number = _whole(given)
            if number is None or number < 1:
                raise invalid(
                    f"research.{name} must be a whole number of at least 1.",
                    "research_budget_invalid",
                )
            limit = config[FIELDS[name][1]]
            if number > limit:
                raise NumiError(
                    "research_budget_over_limit",
                    f"research.{name} may be at most {limit} on this server.",
                    400,
                )
            fields[name] = number
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def research_mode(payload: dict[str, Any]) -> bool:
    """Whether a send asks for research (`mode`: "chat", the default, or "research")."""
    mode = payload.get("mode")
    if mode in (None, ""):
        return False
    if mode not in MODES:
        raise invalid("mode must be chat or research.", "invalid_mode")
    return mode == "research"


def _cost(value: Any, limit: float) -> float:
    """A cost limit: a finite number above 0, at most `limit`."""
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and len(value.strip()) <= 20:
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise invalid(
            "research.max_cost must be a number above 0 (in the currency of your prices).",
            "research_budget_invalid",
        )
    if number > limit:
        raise NumiError(
            "research_budget_over_limit",
            f"research.max_cost may be at most {limit:g} on this server.",
            400,
        )
    return round(number, 6)


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 12:
        return int(value.strip())
    return None
