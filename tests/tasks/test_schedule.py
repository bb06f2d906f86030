"""Schedules (numi/tasks/schedule.py): presets and cron expressions, and their next due
times in a time zone, across both daylight-saving changes of one zone (Europe/Berlin:
clocks skip 02:00-03:00 on 29 March 2026 and repeat 02:00-03:00 on 25 October 2026)."""

from __future__ import annotations

from datetime import datetime

import pytest

from numi.errors import NumiError
from numi.tasks.schedule import check_interval, parse, zone

BERLIN = "Europe/Berlin"


def runs(expression: str, start: datetime, count: int, tz: str = BERLIN) -> list[datetime]:
    schedule, found, moment = parse(expression), [], start
    for _ in range(count):
        moment = schedule.next_after(moment, tz)
        found.append(moment)
    return found


@pytest.mark.parametrize(
    ("text", "cron"),
    [
        ("every weekday at 8:00", "0 8 * * 1-5"),
        ("Every Monday", "0 9 * * 1"),
        ("every monday at 7:30pm", "30 19 * * 1"),
        ("every hour", "0 * * * *"),
        ("every 15 minutes", "*/15 * * * *"),
        ("every day at 18:05", "5 18 * * *"),
        ("@daily", "0 0 * * *"),
        ("0 8 * * mon-fri", "0 8 * * mon-fri"),
    ],
)
def test_presets_read_as_cron(text, cron):
    assert parse(text).cron == cron


@pytest.mark.parametrize(
    "text",
    [
        "",
        "every fortnight",
        "61 * * * *",
        "* * * *",
        "0 25 * * *",
        "0 8 * * funday",
        "every day at 25:00",
    ],
)
def test_a_bad_schedule_is_refused_with_its_code(text):
    with pytest.raises(NumiError) as refused:
        parse(text)
    assert refused.value.code == "invalid_schedule"


def test_an_unknown_time_zone_is_refused():
    with pytest.raises(NumiError) as refused:
        zone("Mars/Olympus_Mons")
    assert refused.value.code == "invalid_timezone"


def test_the_minimum_interval():
    check_interval(parse("every 5 minutes"), 5)
    check_interval(parse("0 8,9 * * *"), 60)
    # Minutes apart within an hour, and across midnight (23:58, then 00:00).
    for text, minimum in (("every 4 minutes", 5), ("0,3 8 * * *", 5), ("0,58 0,23 * * *", 5)):
        with pytest.raises(NumiError) as refused:
            check_interval(parse(text), minimum)
        assert refused.value.code == "schedule_too_frequent"


def test_spring_forward_a_skipped_time_runs_once_at_the_change():
    # 02:30 does not exist on 29 March: the daily run happens at 03:00 CEST (01:00 UTC),
    # and the days around it at 02:30 local (01:30 UTC before, 00:30 UTC after).
    assert runs("every day at 2:30", datetime(2026, 3, 27, 12), 3) == [
        datetime(2026, 3, 28, 1, 30),
        datetime(2026, 3, 29, 1, 0),
        datetime(2026, 3, 30, 0, 30),
    ]
    # Every 30 minutes: the skipped hour is one run at the change, not a burst.
    assert runs("every 30 minutes", datetime(2026, 3, 29, 0, 15), 4) == [
        datetime(2026, 3, 29, 0, 30),  # 01:30 CET
        datetime(2026, 3, 29, 1, 0),  # 03:00 CEST, for 02:00, 02:30 and 03:00
        datetime(2026, 3, 29, 1, 30),  # 03:30 CEST
        datetime(2026, 3, 29, 2, 0),
    ]


def test_fall_back_a_repeated_time_runs_once_but_every_hour_runs_in_both():
    # 02:30 happens twice on 25 October: a daily task runs at the first (00:30 UTC) only.
    assert runs("every day at 2:30", datetime(2026, 10, 24, 12), 2) == [
        datetime(2026, 10, 25, 0, 30),
        datetime(2026, 10, 26, 1, 30),
    ]
    # An hourly task runs in both 02:00 hours: both happened.
    assert runs("every hour", datetime(2026, 10, 24, 23, 30), 4) == [
        datetime(2026, 10, 25, 0, 0),  # 02:00 CEST
        datetime(2026, 10, 25, 1, 0),  # 02:00 CET
        datetime(2026, 10, 25, 2, 0),  # 03:00 CET
        datetime(2026, 10, 25, 3, 0),
    ]


def test_weekdays_and_a_schedule_that_never_comes():
    # Friday 4 December 2026, 20:00 in New York: the next weekday 8:00 is Monday's.
    assert runs("every weekday at 8:00", datetime(2026, 12, 5, 1), 1, "America/New_York") == [
        datetime(2026, 12, 7, 13, 0)
    ]
    assert parse("0 0 31 2 *").next_after(datetime(2026, 1, 1), "UTC") is None
