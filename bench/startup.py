"""Start-up: process start to the first HTTP 200, on a fresh and on an existing data dir,
each set against its floor measured in the same run: a bare Flask app with one route on
gevent's WSGI server (bench/bare.py), same virtualenv, started and polled the same way."""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from live import LiveNumi, free_port
from stats import row

HERE = Path(__file__).resolve().parent


def bare_flask() -> float:
    """Seconds from process start to the first 200 of the bare app."""
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "bare.py"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    return time.perf_counter() - started
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("bare app exited") from None
                time.sleep(0.005)
    finally:
        proc.terminate()
        proc.wait(10)


def compile_bytecode() -> None:
    """Write the bytecode of Numi's own modules and migrations, as `pip install` does.

    The floor's modules all come from site-packages with their bytecode; Numi's, run from a
    source tree, have none where PYTHONDONTWRITEBYTECODE is set (as in some shells and
    CI), and each start would then compile ~100 modules from source (about half a floor).
    That is a cost of the checkout, not of Numi as installed."""
    import numi  # the package `numi serve` will import (PYTHONPATH first), without its dependencies

    for folder in ("numi", "migrations"):
        compileall.compile_dir(str(numi.ROOT / folder), quiet=1)


def measure(runs: int = 5) -> list[dict]:
    compile_bytecode()
    fresh, existing, floor = [], [], []
    for _ in range(runs):
        # Interleaved, so that a busy moment of the machine hits both sides alike.
        floor.append(bare_flask())
        numi = LiveNumi()
        fresh.append(numi.start())
        numi.stop()
        existing.append(numi.start())
        numi.stop()
        shutil.rmtree(numi.data_dir, ignore_errors=True)
    rows = [
        row(
            "startup",
            "bare Flask on gevent's WSGI server (the floor)",
            [v * 1000 for v in floor],
            "ms",
        )
    ]
    for label, values, target in (
        ("fresh data dir", fresh, "≤ 2.5× floor"),
        ("existing data dir", existing, "≤ 2.0× floor"),
    ):
        ratios = [v / f for v, f in zip(values, floor)]
        rows.append(row("startup", label, [v * 1000 for v in values], "ms", target, ratio=ratios))
    return rows
