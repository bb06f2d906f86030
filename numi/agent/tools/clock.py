"""`current_time`: the date and time where the user is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import Tool, ToolContext


def user_now(
    timezone_name: str | None, offset_minutes: int | None, now: datetime | None = None
) -> datetime:
    """Now in the user's IANA time zone, else their UTC offset, else UTC."""
    now = now or datetime.now(UTC)
    if timezone_name:
        try:
            return now.astimezone(ZoneInfo(timezone_name))
        except (ZoneInfoNotFoundError, ValueError):
            pass
    if offset_minutes is not None:
        return now.astimezone(timezone(timedelta(minutes=offset_minutes)))
    return now


def _current_time(arguments: dict, context: ToolContext) -> dict:
    local = user_now(arguments.get("timezone") or context.timezone, context.tz_offset_minutes)
    return {
        "iso": local.isoformat(timespec="seconds"),
        "weekday": local.strftime("%A"),
        "timezone": str(local.tzinfo),
    }


CURRENT_TIME = Tool(
    name="current_time",
    description="Get the current date and time in the user's time zone (or a given IANA time zone).",
    parameters={
        "type": "object",
        "properties": {
            "timezone": {
                "type": "string",
                "description": "Optional IANA time zone, e.g. Europe/Paris.",
            }
        },
    },
    run=_current_time,
)
