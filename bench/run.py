"""Run every benchmark and write bench/results/latest.md and latest.json.

    python bench/run.py                 # everything (5 to 15 minutes, by the machine's load)
    python bench/run.py startup memory  # some of them

Benchmarks print numbers; they never fail on timing. Each figure is a median over several
runs with min and max. A timing on a shared machine drifts from run to run, so each timing
row also has a floor measured in the same run (a bare Flask app for start-up, a raw httpx
read for the relay, a bare gevent WebSocket echo for per-event CPU, the static files for
page weight) and the "× floor" column is the median of the per-run ratios.
"""

from __future__ import annotations

import json
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cancel  # noqa: E402
import compare  # noqa: E402
import decode  # noqa: E402
import fairness  # noqa: E402
import gateway  # noqa: E402
import idle  # noqa: E402
import imports  # noqa: E402
import install  # noqa: E402
import kernel  # noqa: E402
import logins  # noqa: E402
import load  # noqa: E402
import locked  # noqa: E402
import memory  # noqa: E402
import pages  # noqa: E402
import redaction  # noqa: E402
import redis_cluster  # noqa: E402
import relay  # noqa: E402
import render  # noqa: E402
import retrieval  # noqa: E402
import scaleout  # noqa: E402
import scaleout_cpu  # noqa: E402
import scaleout_model  # noqa: E402
import sdk_memory  # noqa: E402
import startup  # noqa: E402
import turncost  # noqa: E402
import turns  # noqa: E402
from stats import table  # noqa: E402

BENCHMARKS = {
    "install": install.measure,
    "startup": startup.measure,
    "memory": memory.measure,
    "sdk-memory": sdk_memory.measure,
    "pages": pages.measure,
    "pickers": pages.picker_chat,
    "turns": turns.measure,
    "turncost": turncost.measure,
    "relay": relay.measure,
    "gateway": gateway.measure,
    "render": render.measure,
    "redaction": redaction.measure,
    # 200,000 chunks built in a temporary SQLite file (about a minute on a quiet machine).
    "retrieval": retrieval.rows,
    "cancel": cancel.measure,
    "compare": compare.measure,
    # Paced: a read per token, as from a real model (the README row); unpaced in its CLI.
    "decode": lambda: decode.measure(4000, 3, paced=0.0005),
    "load": load.measure,
    "idle": idle.measure,
    "locked": locked.measure,
    "logins": logins.measure,
    "fairness": fairness.measure,
    "imports": imports.measure,
    "kernel": kernel.measure,
    "scaleout": scaleout.measure,
    "scaleout-capacity": scaleout.capacity,
    # Need Redis and PostgreSQL on this machine, as `scaleout` does (bench/cluster.py).
    "scaleout-cpu": scaleout_cpu.cpu,
    "scaleout-three": scaleout_cpu.three,
    "scaleout-model": scaleout_model.measure,
    "redis-cluster": redis_cluster.measure,
}


def main(argv: list[str]) -> None:
    chosen = argv or list(BENCHMARKS)
    rows: list[dict] = []
    started = time.time()
    failed = []
    for name in chosen:
        print(f"running {name} …", flush=True)
        try:
            rows += BENCHMARKS[name]()
        except Exception:
            # One broken benchmark must not throw away the rows the others took minutes to
            # measure: report it, keep going, and exit non-zero at the end.
            traceback.print_exc()
            failed.append(name)
    machine = f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (
        f"Numi benchmarks, {stamp}, {machine} ({time.time() - started:.0f} s)\n\n{table(rows)}\n"
    )
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.md").write_text(report)
    (results / "latest.json").write_text(
        json.dumps({"date": stamp, "machine": machine, "rows": rows}, indent=2)
    )
    print()
    print(report)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main(sys.argv[1:])
