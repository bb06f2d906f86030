"""Summaries for benchmark rows: median with min and max, percentiles."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def row(benchmark: str, metric: str, values: list[float], unit: str, target: str = "", note: str = "",
        ratio: list[float] | None = None) -> dict:
    """One result line: the median of `values`, with min and max and the run count, and
    the median of `ratio`, each run's value over its floor measured in the same run."""
    return {
        "ratio": statistics.median(ratio) if ratio else None,
        "benchmark": benchmark,
        "metric": metric,
        "median": statistics.median(values) if values else float("nan"),
        "min": min(values) if values else float("nan"),
        "max": max(values) if values else float("nan"),
        "runs": len(values),
        "unit": unit,
        "target": target,
        "note": note,
    }
