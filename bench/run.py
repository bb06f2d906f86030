"""Run every benchmark and write bench/results/latest.md and latest.json.

    python bench/run.py                 # everything (about 3 minutes)
    python bench/run.py startup memory  # some of them

Benchmarks print numbers; they never fail on timing. Each figure is a median over several
runs with min and max; ratios are measured in the same run.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import install  # noqa: E402
import memory  # noqa: E402
import pages  # noqa: E402
import relay  # noqa: E402
import scaleout  # noqa: E402
import startup  # noqa: E402
import turns  # noqa: E402

BENCHMARKS = {
    "install": install.measure,
    "startup": startup.measure,
    "memory": memory.measure,
    "pages": pages.measure,
    "turns": turns.measure,
    "relay": relay.measure,
    "scaleout": scaleout.measure,
}


def _fmt(value: float) -> str:
    if value != value:  # NaN
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def table(rows: list[dict]) -> str:
    lines = ["| benchmark | metric | median | min | max | runs | target | note |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        lines.append(f"| {r['benchmark']} | {r['metric']} | {_fmt(r['median'])}{unit} | {_fmt(r['min'])} | "
                     f"{_fmt(r['max'])} | {r['runs']} | {r['target']} | {r['note']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    chosen = argv or list(BENCHMARKS)
    rows: list[dict] = []
    started = time.time()
    for name in chosen:
        print(f"running {name} …", flush=True)
        rows += BENCHMARKS[name]()
    machine = f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = f"Numi benchmarks, {stamp}, {machine} ({time.time() - started:.0f} s)\n\n{table(rows)}\n"
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.md").write_text(report)
    (results / "latest.json").write_text(json.dumps({"date": stamp, "machine": machine, "rows": rows}, indent=2))
    print()
    print(report)


if __name__ == "__main__":
    main(sys.argv[1:])
