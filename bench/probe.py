"""A benchmark-only plugin (NUMI_PLUGINS=probe, with bench/ on PYTHONPATH) that measures,
inside the server, what a profiler's CPU samples cannot show:

- hub lag: a greenlet asks to wake every 5 ms and records how late it wakes. Anything that
  keeps the hub from switching (a long CPU burst, a blocking C call such as pysqlite, or
  simply no CPU from the machine) shows up here as lag;
- time in SQLite (or whichever DBAPI): statements and commits, timed around the driver
  calls. pysqlite is not cooperative, so every one of these blocks every greenlet while it
  lasts;
- the process's run-queue wait (/proc/self/schedstat): time it was ready to run but the
  machine gave it no CPU, i.e. the part of the lag that is other processes' fault.

Counters are cumulative; they are written as JSON to $NUMI_DATA_DIR/probe.json every
500 ms (with their own clock), and the benchmark diffs two readings around its measurement window.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import gevent

INTERVAL = 0.005
# Lag histogram bucket upper bounds, ms.
BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, float("inf"))


class Counters:
    def __init__(self) -> None:
        self.lag_samples = 0
        self.lag_total = 0.0
        self.lag_max = 0.0
        self.lag_hist = [0] * len(BUCKETS)
        self.db_calls = 0
        self.db_commits = 0
        self.db_seconds = 0.0
        self.db_commit_seconds = 0.0
        self.db_max = 0.0

    def as_dict(self) -> dict:
        with open("/proc/self/schedstat") as stat:
            on_cpu, waiting, _ = (int(v) for v in stat.read().split())
        times = os.times()
        return {
            **self.__dict__,
            "cpu": times.user + times.system,
            "on_cpu": on_cpu / 1e9,
            "run_queue_wait": waiting / 1e9,
            "clock": time.perf_counter(),
        }


def _lag_sampler(counters: Counters) -> None:
    while True:
        asked = time.perf_counter()
        gevent.sleep(INTERVAL)
        lag = (time.perf_counter() - asked - INTERVAL) * 1000
        counters.lag_samples += 1
        counters.lag_total += max(lag, 0.0)
        counters.lag_max = max(counters.lag_max, lag)
        counters.lag_hist[next(i for i, bound in enumerate(BUCKETS) if lag <= bound)] += 1


def _time_dbapi(engine, counters: Counters) -> None:
    dialect = engine.dialect

    def timed(method, commit: bool):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                counters.db_seconds += spent
                counters.db_max = max(counters.db_max, spent)
                if commit:
                    counters.db_commits += 1
                    counters.db_commit_seconds += spent
                else:
                    counters.db_calls += 1

        return wrapper

    dialect.do_execute = timed(dialect.do_execute, False)
    dialect.do_executemany = timed(dialect.do_executemany, False)
    dialect.do_execute_no_params = timed(dialect.do_execute_no_params, False)
    dialect.do_commit = timed(dialect.do_commit, True)


def _writer(counters: Counters, path: Path) -> None:
    while True:
        path.write_text(json.dumps(counters.as_dict()))
        gevent.sleep(0.5)


def register(app) -> None:
    from numi.extensions import db

    counters = Counters()
    with app.app_context():
        _time_dbapi(db.engine, counters)
    gevent.spawn(_lag_sampler, counters)
    gevent.spawn(_writer, counters, Path(app.config["NUMI_DATA_DIR"]) / "probe.json")


def read(data_dir: str) -> dict:
    """The latest counters a probed server wrote (benchmark side)."""
    for _ in range(50):
        try:
            return json.loads((Path(data_dir) / "probe.json").read_text())
        except (OSError, ValueError):  # not written yet, or caught mid-write
            time.sleep(0.05)
    raise RuntimeError(
        "the probe wrote nothing: is NUMI_PLUGINS=probe set and bench/ on PYTHONPATH?"
    )


def window(before: dict, after: dict) -> dict:
    """What happened between two readings: per-second rates and lag percentiles."""
    # The readings come from the probe's own greenlet: on a starved server it may not
    # have ticked between them, and then there is no window to divide by (nan, not a crash).
    wall = (after["clock"] - before["clock"]) or float("nan")
    hist = [a - b for a, b in zip(after["lag_hist"], before["lag_hist"])]
    samples = sum(hist) or 1

    def lag_percentile(q: float) -> float:
        seen = 0
        for bound, count in zip(BUCKETS, hist):
            seen += count
            if seen >= q / 100 * samples:
                return bound
        return float("inf")

    return {
        "wall": wall,
        "cpu_share": (after["cpu"] - before["cpu"]) / wall,
        "run_queue_wait_share": (after["run_queue_wait"] - before["run_queue_wait"]) / wall,
        "db_share": (after["db_seconds"] - before["db_seconds"]) / wall,
        "db_commit_share": (after["db_commit_seconds"] - before["db_commit_seconds"]) / wall,
        "db_calls_per_s": (after["db_calls"] - before["db_calls"]) / wall,
        "db_commits_per_s": (after["db_commits"] - before["db_commits"]) / wall,
        "db_max_ms": after["db_max"] * 1000,
        "lag_mean_ms": (after["lag_total"] - before["lag_total"]) / samples,
        "lag_p50_ms_at_most": lag_percentile(50),
        "lag_p99_ms_at_most": lag_percentile(99),
        "lag_max_ms": after["lag_max"],
    }
