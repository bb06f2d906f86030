"""Start-up: process start to the first HTTP 200, on a fresh and on an existing data dir."""

from __future__ import annotations

import shutil

from live import LiveNumi
from stats import row


def measure(runs: int = 5) -> list[dict]:
    fresh, existing = [], []
    for _ in range(runs):
        numi = LiveNumi()
        fresh.append(numi.start())
        numi.stop()
        existing.append(numi.start())
        numi.stop()
        shutil.rmtree(numi.data_dir, ignore_errors=True)
    return [
        row("startup", "fresh data dir", [v * 1000 for v in fresh], "ms", "≤ 1000 ms"),
        row("startup", "existing data dir", [v * 1000 for v in existing], "ms", "≤ 1000 ms"),
    ]
