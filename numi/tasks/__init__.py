"""Scheduled tasks (issue 38): a prompt that runs on a schedule through the turn engine.

`schedule` reads cron expressions and presets and finds the next due time in the user's
time zone; `store` checks and keeps the user's tasks; `runs` claims a due time exactly once
across processes, starts its turn (a turn like any other, durable like any other) and
records how it ended; `scheduler` is the greenlet of a serving process that wakes at the
next due time, under a clock the tests replace.
"""
