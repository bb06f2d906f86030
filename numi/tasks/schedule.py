"""Schedules: cron expressions and presets, read into `Schedule`, and their next due time
in the user's time zone.

A schedule is a five-field cron expression (minute, hour, day of month, month, day of
week: numbers, names, `*`, ranges, steps and lists, and `@hourly`/`@daily`/`@weekly`/
`@monthly`) or a preset in words ("every weekday at 8:00", "every Monday", "every hour",
"every 15 minutes"), which reads into a cron expression. Our own parser, because it is
small (this module), and the part that matters, what a wall-clock time means on the days
the clocks change, is a rule we state and test here rather than a library's:

- a time the clocks skip (02:30 when spring jumps from 02:00 to 03:00) runs once, at the
  change (03:00 new time): a daily task still runs that day, and an every-5-minutes task
  runs once for the skipped hour, not twelve times at once;
- a time the clocks repeat (02:30 when autumn goes back from 03:00 to 02:00) runs once, at
  its first occurrence, unless the hour field is `*`: an hourly or every-N-minutes task
  runs in both hours, since both really happened.

Times are computed with zoneinfo; stored times are naive UTC, as every stored time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import NumiError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
DAY_NAMES = {
    "sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5,
    "saturday": 6,
}  # fmt: skip
MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}
# A preset without a time of day ("every Monday") runs at 9:00, the start of a work day.
DEFAULT_TIME = (9, 0)
# How far ahead a next run is looked for: the rarest schedule, 29 February on a Monday,
# comes round within 28 years.
SEARCH_DAYS = 366 * 29


def invalid_schedule(detail: str) -> NumiError:
    return NumiError(
        "invalid_schedule",
        f"{detail} Use a cron expression (minute hour day month weekday, e.g. '0 8 * * 1-5') "
        "or a preset such as 'every weekday at 8:00', 'every Monday', 'every hour'.",
        400,
    )


def zone(name: object) -> ZoneInfo:
    """The IANA time zone `name` (e.g. Europe/Berlin), or `invalid_timezone`."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise NumiError("invalid_timezone", "timezone must be an IANA time zone name.", 400)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise NumiError(
            "invalid_timezone",
            f"Unknown time zone {name!r}: use a name such as Europe/Berlin.",
            400,
        ) from None


@dataclass(frozen=True)
class Schedule:
    """A parsed cron expression: the allowed values of each field."""

    cron: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    # Cron's rule: when both day of month and day of week are restricted, either matches.
    days_restricted: bool
    weekdays_restricted: bool
    every_hour: bool  # the hour field is `*`: repeated wall-clock hours run twice

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_month or in_week
        return in_month and in_week

    def min_gap_minutes(self) -> int:
        """The shortest time between two runs on the clock (across midnight too)."""
        times = sorted(h * 60 + m for h in self.hours for m in self.minutes)
        gaps = [b - a for a, b in zip(times, times[1:])]
        gaps.append(times[0] + 24 * 60 - times[-1])
        return min(gaps)

    def next_after(self, after: datetime, timezone: str) -> datetime | None:
        """The first due time strictly after `after` (naive UTC), as naive UTC; None when
        the expression never matches (31 February)."""
        tz = zone(timezone)
        start = after.replace(tzinfo=UTC).astimezone(tz).date() - timedelta(days=1)
        for offset in range(SEARCH_DAYS):
            day = start + timedelta(days=offset)
            if not self.matches_day(day):
                continue
            due = [moment for moment in self._day_times(day, tz) if moment > after]
            if due:
                return min(due)
        return None

    def _day_times(self, day: date, tz: ZoneInfo) -> list[datetime]:
        """The day's due times as naive UTC, each real instant once."""
        found: set[datetime] = set()
        for hour in self.hours:
            for minute in self.minutes:
                wall = datetime.combine(day, time(hour, minute), tzinfo=tz)
                if not _exists(wall):
                    found.add(_gap_end(wall, tz))
                    continue
                first, second = _utc(wall), _utc(wall.replace(fold=1))
                found.add(first)
                if second != first and self.every_hour:
                    found.add(second)  # a repeated hour: its second pass
        return sorted(found)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def _exists(wall: datetime) -> bool:
    """Whether a wall-clock time happens at all (not skipped by a forward change)."""
    round_trip = wall.astimezone(UTC).astimezone(wall.tzinfo)
    return round_trip.replace(tzinfo=None) == wall.replace(tzinfo=None)


def _gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant the clocks jumped past a skipped wall-clock time, as naive UTC."""
    # Before the gap (fold 0 reads it with the old offset) the instant is already past the
    # change; walk back minute by minute to the first instant whose wall time is past it.
    naive = wall.replace(tzinfo=None)
    instant = wall.astimezone(UTC)
    while (instant - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None) > naive:
        instant -= timedelta(minutes=1)
    return instant.replace(tzinfo=None)


def parse(text: object) -> Schedule:
    """A preset or cron expression, checked: `invalid_schedule` (400) otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise invalid_schedule("A schedule is required.")
    if len(text) > 200:
        raise invalid_schedule("That schedule is too long.")
    cleaned = " ".join(text.strip().lower().split())
    expression = MACROS.get(cleaned) or _preset(cleaned) or cleaned
    fields = expression.split(" ")
    if len(fields) != 5:
        raise invalid_schedule(f"{text.strip()!r} is neither a preset nor a cron expression.")
    minute, hour, day, month, weekday = fields
    weekdays = {v % 7 for v in _field(weekday, 0, 7, DAYS, "day of week")}  # 7 is Sunday too
    return Schedule(
        cron=expression,
        minutes=tuple(sorted(_field(minute, 0, 59, (), "minute"))),
        hours=tuple(sorted(_field(hour, 0, 23, (), "hour"))),
        days=frozenset(_field(day, 1, 31, (), "day of month")),
        months=frozenset(_field(month, 1, 12, MONTHS, "month", first=1)),
        weekdays=frozenset(weekdays),
        days_restricted=not day.startswith("*"),
        weekdays_restricted=not weekday.startswith("*"),
        every_hour=hour == "*",
    )


def _field(
    text: str, low: int, high: int, names: tuple[str, ...], what: str, first: int = 0
) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = _number(step_text, names, first, what) if step_text else 1
        if step < 1:
            raise invalid_schedule(f"The {what} step must be at least 1.")
        if body == "*":
            start, end = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            start, end = _number(a, names, first, what), _number(b, names, first, what)
        else:
            start = _number(body, names, first, what)
            end = high if step_text else start
        if not low <= start <= end <= high:
            raise invalid_schedule(f"The {what} field {part!r} is out of range ({low}-{high}).")
        values.update(range(start, end + 1, step))
    return values


def _number(text: str, names: tuple[str, ...], first: int, what: str) -> int:
    if text.isdecimal() and len(text) <= 2:
        return int(text)
    if text[:3] in names and len(text) >= 3:
        return names.index(text[:3]) + first
    raise invalid_schedule(f"{text!r} is not a valid {what}.")


_TIME = r"(?:\s+at\s+(?P<time>\d{1,2}(?::\d{2})?\s*(?:am|pm)?))?"
_PRESETS = (
    (re.compile(r"every\s+minute"), lambda m: "* * * * *"),
    (
        re.compile(r"every\s+(?P<n>\d{1,2})\s+minutes?"),
        lambda m: f"*/{_range(m['n'], 1, 59)} * * * *",
    ),
    (re.compile(r"every\s+hour|hourly"), lambda m: "0 * * * *"),
    (
        re.compile(r"every\s+(?P<n>\d{1,2})\s+hours?"),
        lambda m: f"0 */{_range(m['n'], 1, 23)} * * *",
    ),
    (re.compile(r"(?:every\s+day|daily)" + _TIME), lambda m: _at(m, "* * *")),
    (re.compile(r"every\s+weekday" + _TIME), lambda m: _at(m, "* * 1-5")),
    (re.compile(r"every\s+weekend(?:\s+day)?" + _TIME), lambda m: _at(m, "* * 0,6")),
    (
        re.compile(r"every\s+(?P<day>" + "|".join(DAY_NAMES) + r")" + _TIME),
        lambda m: _at(m, f"* * {DAY_NAMES[m['day']]}"),
    ),
    (re.compile(r"every\s+month" + _TIME), lambda m: _at(m, "1 * *")),
)


def _preset(text: str) -> str | None:
    for pattern, to_cron in _PRESETS:
        matched = pattern.fullmatch(text)
        if matched:
            return to_cron(matched)
    return None


def _range(text: str, low: int, high: int) -> int:
    value = int(text)
    if not low <= value <= high:
        raise invalid_schedule(f"{value} is out of range ({low}-{high}).")
    return value


def _at(matched: re.Match[str], rest: str) -> str:
    hour, minute = _clock(matched["time"]) if matched["time"] else DEFAULT_TIME
    return f"{minute} {hour} {rest}"


def _clock(text: str) -> tuple[int, int]:
    """'8:00', '08:30', '8am', '8:30 pm', '20:00' as (hour, minute)."""
    found = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", text.strip())
    if not found:
        raise invalid_schedule(f"{text!r} is not a time of day.")
    hour, minute, half = int(found[1]), int(found[2] or 0), found[3]
    if half:
        if not 1 <= hour <= 12:
            raise invalid_schedule(f"{text!r} is not a time of day.")
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise invalid_schedule(f"{text!r} is not a time of day.")
    return hour, minute


def check_interval(schedule: Schedule, min_minutes: int) -> None:
    """Refuse a schedule that runs more often than every `min_minutes` (the setting
    NUMI_TASK_MIN_INTERVAL_MINUTES): `schedule_too_frequent`."""
    gap = schedule.min_gap_minutes()
    if gap < min_minutes:
        raise NumiError(
            "schedule_too_frequent",
            f"This schedule runs every {gap} minute{'s' if gap != 1 else ''}; tasks may run at "
            f"most every {min_minutes} minutes.",
            400,
        )
