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

Memory, for finding what a server holds after its turns (issue 45): with
BENCH_PROBE_TRACEMALLOC=1 the probe traces allocations from the plugin's load, and
`ask(data_dir, command)` has it answer one of `COMMANDS`: a tracemalloc snapshot written
beside probe.json, a full collection, glibc's `malloc_trim(0)`, live objects counted by type.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import time
import tracemalloc
from collections import Counter
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


def _caller() -> str:
    """The innermost Numi frame (outside numi/database.py) of the statement being run."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/numi/" in name and not name.endswith("database.py"):
            where = name[name.rindex("/numi/") + 1 :]
            return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def _time_dbapi(engine, counters: Counters) -> None:
    dialect = engine.dialect
    # BENCH_PROBE_SQL_LOG=FILE: every statement and commit, with the Numi code that ran it.
    sql_log = os.environ.get("BENCH_PROBE_SQL_LOG")
    log = open(sql_log, "a", buffering=1) if sql_log else None  # noqa: SIM115 (process-long)

    def timed(method, commit: bool):
        def wrapper(*args, **kwargs):
            if log is not None:
                text = "COMMIT" if commit else " ".join(str(args[1]).split())[:160]
                log.write(f"{_caller()}\t{text}\n")
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


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))


def _snapshot(data_dir: Path, name: str) -> dict:
    gc.collect()
    tracemalloc.take_snapshot().dump(str(data_dir / f"{name}.tracemalloc"))
    return {"traced_mib": tracemalloc.get_traced_memory()[0] / 2**20}


def _trim(data_dir: Path, name: str) -> dict:
    started = time.perf_counter()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return {"trim_ms": (time.perf_counter() - started) * 1000}


def _types(data_dir: Path, name: str) -> dict:
    gc.collect()
    counts = Counter(type(o).__qualname__ for o in gc.get_objects())
    return {"types": dict(counts.most_common(40))}


def _garbage(data_dir: Path, name: str) -> dict:
    """What the next full collection frees, counted by type (kept aside, then let go)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        counts = Counter(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return {"garbage": dict(counts.most_common(30))}


def _cycles(data_dir: Path, name: str) -> dict:
    """For a few types in the garbage, which garbage objects refer to one of them, and how."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage = {id(o) for o in gc.garbage}
        found = {}
        for kind in ("Turn", "Agent", "Greenlet", "ChatContextService", "ContextWindow"):
            one = next((o for o in gc.garbage if type(o).__qualname__ == kind), None)
            if one is None:
                continue
            refs = []
            for r in gc.get_referrers(one):
                if id(r) not in garbage:
                    continue
                where = type(r).__qualname__
                if isinstance(r, dict):
                    where += ":" + ",".join(str(k) for k, v in r.items() if v is one)[:80]
                refs.append(where)
            found[kind] = refs[:10]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return {"cycles": found}


def _pymalloc(data_dir: Path, name: str) -> dict:
    """pymalloc's own account (sys._debugmallocstats writes it to stderr, fd 2)."""
    path = data_dir / f"{name}.pymalloc"
    saved = os.dup(2)
    with open(path, "w") as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    lines = path.read_text().splitlines()
    arenas = [line for line in lines if line.startswith("# arenas")]
    return {"pymalloc": arenas, "glibc": _mallinfo()}


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()
    ]


def _mallinfo() -> dict:
    """glibc's heap, MiB: `arena` (brk heap), `hblkhd` (mmapped), in use, free."""
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return {
        name: round(getattr(info, name) / 2**20, 1)
        for name in ("arena", "hblkhd", "uordblks", "fordblks")
    }


def _collect(data_dir: Path, name: str) -> dict:
    started = time.perf_counter()
    collected = gc.collect()
    return {"collected": collected, "gc_ms": (time.perf_counter() - started) * 1000}


COMMANDS = {
    "pymalloc": _pymalloc,
    "cycles": _cycles,
    "garbage": _garbage,
    "snapshot": _snapshot,
    "gc": _collect,
    "trim": _trim,
    "types": _types,
}


def _answer(data_dir: Path) -> None:
    """Run each command `ask` leaves in probe-ask (debug only: the memory hunt's hook)."""
    asked = data_dir / "probe-ask"
    while True:
        gevent.sleep(0.1)
        try:
            command, name = asked.read_text().split()
        except (OSError, ValueError):
            continue
        asked.unlink()
        answer = {"rss_before": _rss_mib(), **COMMANDS[command](data_dir, name)}
        answer["rss_after"] = _rss_mib()
        (data_dir / f"probe-{name}.json").write_text(json.dumps(answer))


def ask(data_dir: str, command: str, name: str, timeout: float = 120) -> dict:
    """Have a probed server run one of COMMANDS; its answer (RSS around it, MiB)."""
    answer = Path(data_dir) / f"probe-{name}.json"
    Path(data_dir, "probe-ask").write_text(f"{command} {name}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(answer.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise TimeoutError(f"the probe did not answer {command}")


def register(app) -> None:
    from numi.extensions import db

    if os.environ.get("BENCH_PROBE_TRACEMALLOC") == "1":
        tracemalloc.start(int(os.environ.get("BENCH_PROBE_FRAMES", "12")))
    counters = Counters()
    with app.app_context():
        _time_dbapi(db.engine, counters)
    data_dir = Path(app.config["NUMI_DATA_DIR"])
    gevent.spawn(_lag_sampler, counters)
    gevent.spawn(_writer, counters, data_dir / "probe.json")
    gevent.spawn(_answer, data_dir)


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
