"""Summaries for benchmark rows: median with min and max, percentiles."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def row(
    benchmark: str,
    metric: str,
    values: list[float],
    unit: str,
    target: str = "",
    note: str = "",
    ratio: list[float] | None = None,
) -> dict:
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


def _fmt(value: float) -> str:
    if value != value:  # NaN
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table, the form PROFILE.md and the README quote."""
    lines = [
        "| benchmark | metric | median | × floor | min | max | runs | target | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        ratio = f"{r['ratio']:.2f}×" if r.get("ratio") is not None else ""
        lines.append(
            f"| {r['benchmark']} | {r['metric']} | {_fmt(r['median'])}{unit} | {ratio} | {_fmt(r['min'])} | "
            f"{_fmt(r['max'])} | {r['runs']} | {r['target']} | {r['note']} |"
        )
    return "\n".join(lines)
