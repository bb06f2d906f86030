"""A research run's budget: most steps, most pages read, most tokens and a time limit.

A send in research mode (`"mode": "research"`) may carry `research: {max_steps, max_pages,
max_tokens, time_limit_seconds}`; each field it leaves out takes its default from the
settings (`NUMI_RESEARCH_MAX_*`, `NUMI_RESEARCH_TIME_LIMIT_SECONDS`). A field that is not a
whole number of at least 1 is refused (`research_budget_invalid`), one above the
administrator's limit (`NUMI_RESEARCH_LIMIT_*`) too (`research_budget_over_limit`), before
anything is saved. No database here: it is read at the edge with the rest of the `Send`.
"""

from __future__ import annotations

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
MODES = ("chat", "research")
# A scheduled task whose tools name this runs each time as a research run (numi/tasks/runs.py).
RESEARCH_TOOL = "research"


@dataclass(frozen=True)
class ResearchBudget:
    max_steps: int
    max_pages: int
    max_tokens: int
    time_limit_seconds: int

    @classmethod
    def defaults(cls, config: Any) -> ResearchBudget:
        """The settings' budget (each default held to its limit)."""
        return cls(**{name: min(config[d], config[limit]) for name, (d, limit) in FIELDS.items()})

    @classmethod
    def from_payload(cls, value: Any, config: Any) -> ResearchBudget:
        """A send's `research` field over the defaults; raises NumiError, changes nothing."""
        if value in (None, ""):
            value = {}
        if not isinstance(value, dict):
            raise invalid(
                "research must be an object: {max_steps, max_pages, max_tokens, "
                "time_limit_seconds}.",
                "research_budget_invalid",
            )
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise invalid(
                f"research has no field {unknown[0]!r}; it takes {', '.join(FIELDS)}.",
                "research_budget_invalid",
            )
        fields = asdict(cls.defaults(config))
        for name, given in value.items():
            if given in (None, ""):
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

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def research_mode(payload: dict[str, Any]) -> bool:
    """Whether a send asks for research (`mode`: "chat", the default, or "research")."""
    mode = payload.get("mode")
    if mode in (None, ""):
        return False
    if mode not in MODES:
        raise invalid("mode must be chat or research.", "invalid_mode")
    return mode == "research"


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 12:
        return int(value.strip())
    return None
