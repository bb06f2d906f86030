"""How a setting's text becomes a value, and the one-line refusal when it cannot.

Each parser raises ValueError with what the value must be; `config.load_config` prefixes
the variable and its value and raises `SettingError`, which the command line prints as one
line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .errors import NumiError, invalid

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingError(NumiError, ValueError):
    """A setting Numi cannot start with: the message names the variable (one line)."""

    def __init__(self, code: str, message: str):
        super().__init__(code, message, 500)


def boolean(value: str) -> bool:
    """A true/false setting: 1/true/yes/on or 0/false/no/off (any case); a typo is refused,
    never read as off."""
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError("must be true or false (1, true, yes, on / 0, false, no, off)")


def whole(minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number from `minimum` to `maximum` (inclusive)."""

    def parse(value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
        _check_range(number, minimum, maximum)
        return number

    return parse


def number(minimum: float = 0.0, maximum: float | None = None) -> Callable[[str], float]:
    """A number (decimals allowed) from `minimum` to `maximum` (inclusive)."""

    def parse(value: str) -> float:
        try:
            parsed = float(value.strip())
        except ValueError:
            raise ValueError("must be a number") from None
        if parsed != parsed or parsed in (float("inf"), float("-inf")):
            raise ValueError("must be a finite number")
        _check_range(parsed, minimum, maximum)
        return parsed

    return parse


def _check_range(value: float, minimum: float, maximum: float | None) -> None:
    if maximum is not None and not minimum <= value <= maximum:
        raise ValueError(f"must be from {minimum:g} to {maximum:g}")
    if value < minimum:
        raise ValueError(f"must be at least {minimum:g}")


def choice(*allowed: str) -> Callable[[str], str]:
    """One of `allowed` (any case; the value is lower-cased)."""

    def parse(value: str) -> str:
        value = value.strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return parse


def log_level(value: str) -> str:
    """A logging level name (any case): DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    level = value.strip().upper()
    if level not in LOG_LEVELS or not isinstance(logging.getLevelName(level), int):
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return level


def text(value: str) -> str:
    return value


def lowercase_list(value: str) -> tuple[str, ...]:
    """Comma-separated items, lower-cased."""
    return tuple(item.strip().lower() for item in value.split(",") if item.strip())


def name_list(value: str) -> tuple[str, ...]:
    """Comma-separated names, case kept (module names)."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse_bool(value: Any, name: str | None = None, code: str = "invalid_input") -> bool:
    """The one reading of a true/false value: a JSON boolean, 0 or 1, or a word from a form,
    a query string or an environment variable ("1", "true", "yes", "on"; any case).

    With `name`, a value that is neither true nor false is refused (`code`, by default
    `invalid_input`, naming the field); without it, anything not true is false.
    """
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    elif value is None or (isinstance(value, int | float) and value in (0, 1)):
        return bool(value)
    if name is None:
        return False
    raise invalid(f"{name} must be true or false.", code)
