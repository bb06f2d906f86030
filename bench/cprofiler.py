"""A benchmark-only plugin (NUMI_PLUGINS=cprofiler, with bench/ on PYTHONPATH): cProfile
inside the server over a window the benchmark chooses. SIGUSR1 starts the profiler,
SIGUSR2 stops it and writes the stats to $NUMI_BENCH_CPROFILE (pstats format).

Every greenlet runs on the main thread, so one profiler sees them all. cProfile does not
know about greenlet switches: a function's own time (tottime) and call counts are right,
its cumulative time may include other greenlets' work. The clock is the process's CPU
time. py-spy is not installed here."""

from __future__ import annotations

import cProfile
import os
import signal
import time


def register(app) -> None:
    path = os.environ.get("NUMI_BENCH_CPROFILE")
    if not path:
        return
    # CPU time, not the wall clock: on a shared machine waiting for a core is not cost.
    profiler = cProfile.Profile(time.process_time)

    def start(*_):
        profiler.enable()

    def stop(*_):
        profiler.disable()
        profiler.dump_stats(path)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
