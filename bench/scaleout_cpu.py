"""Scale-out by CPU accounting (issue 27): CPU per delivered token summed over every Numi
process (from /proc), for 1 and for 2 processes on Redis and PostgreSQL at the same total
load, Redis's own CPU per token, and from them the cluster-wide bound.

    python bench/scaleout_cpu.py [--streams 40] [--tokens 200] [--runs 3] [--three]

A 2-core machine cannot show two processes carrying twice the streams (the load clients,
Redis and PostgreSQL share the cores), but it can count what each delivered token costs:
if 2 processes spend about what 1 does per token, the work splits without overhead, and
Redis's CPU per token says how many tokens/s one Redis core carries for the whole cluster.
Each round also runs the same load on one process with the in-process channel (no Redis),
for the Redis ÷ in-process row. Redis's CPU is the whole server's: other users of the same
Redis add to it, so give the benchmark one of its own:

    redis-server --port 6391 --save '' --appendonly no &
    NUMI_BENCH_REDIS_URL=redis://127.0.0.1:6391/0 python bench/scaleout_cpu.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import cluster
from stats import row


def one_run(
    processes: int, streams: int, tokens: int, *, redis: bool = True, server: str = "serve"
) -> dict:
    """One level of `streams` 20-tokens/s turns on a fresh cluster of `processes` (on
    Redis), or on one process with the in-process channel (`redis=False`); `server` is
    "serve" (a `numi serve` per process) or "gunicorn" (one gunicorn, that many workers)."""
    provider = cluster.PacedProvider(tokens)
    try:
        with cluster.started(server, processes, {}, redis=redis) as (servers, pids):
            # A first turn on every process imports the SDK and warms the caches.
            cluster.capacity_level(servers, provider, len(servers), tokens, pids)
            result = cluster.capacity_level(servers, provider, streams, tokens, pids)
    finally:
        provider.close()
    return per_token(result, streams, tokens, list(pids))


def per_token(result: dict, streams: int, tokens: int, numi: list[str]) -> dict:
    """One run's figures from `cluster.capacity_level`'s result: CPU per delivered token of
    the processes named `numi` (summed) and of Redis, PostgreSQL's per turn."""
    delivered = streams * tokens - result["lost"]
    seconds = {name: share * result["wall"] / 100 for name, share in result["cpu"].items()}
    return {
        "numi_us": sum(seconds[name] for name in numi) / delivered * 1e6,
        "redis_us": seconds["redis-server"] / delivered * 1e6
        if "redis-server" in seconds
        else None,
        # PostgreSQL's backends for these processes, per turn (one turn a stream); None
        # when PostgreSQL runs elsewhere.
        "postgres_turn_ms": seconds["postgres"] / streams * 1e3 if "postgres" in seconds else None,
        "lost": result["lost"],
        "p95": result["p95"],
        "delivered": delivered,
    }


def cpu(runs: int = 3, streams: int = 40, tokens: int = 200) -> list[dict]:
    """Rows: Numi CPU per token (1 and 2 processes), their ratio, Redis CPU per token and
    the bound it sets (tokens/s per Redis core; Numi processes before Redis is the limit)."""
    memory, one, two = [], [], []
    for _ in range(runs):  # alternately, so drift hits all alike
        memory.append(one_run(1, streams, tokens, redis=False))
        one.append(one_run(1, streams, tokens))
        two.append(one_run(2, streams, tokens))
        print(
            f"    in-process {memory[-1]}\n    1 process {one[-1]}\n    2 processes {two[-1]}",
            flush=True,
        )
    load = f"{streams} streams × {tokens} tokens at 20 tokens/s, Redis + PostgreSQL"
    redis = [r["redis_us"] for r in one + two if r["redis_us"]]
    rows = [
        row("scale-out CPU", "Numi CPU per delivered token, 1 process, in-process channel",
            [r["numi_us"] for r in memory], "µs", note=f"lost {sum(r['lost'] for r in memory)}"),
        row("scale-out CPU", "1 process: Redis ÷ in-process, CPU per token",
            [b["numi_us"] / a["numi_us"] for a, b in zip(memory, one)], "×", "≤ 1.3"),
        row("scale-out CPU", f"Numi CPU per delivered token, 1 process, {load}",
            [r["numi_us"] for r in one], "µs", note=f"lost {sum(r['lost'] for r in one)}"),
        row("scale-out CPU", "Numi CPU per delivered token, 2 processes (summed)",
            [r["numi_us"] for r in two], "µs", note=f"lost {sum(r['lost'] for r in two)}"),
        row("scale-out CPU", "2 processes ÷ 1 process, CPU per token",
            [b["numi_us"] / a["numi_us"] for a, b in zip(one, two)], "×", "≤ 1.15"),
    ]  # fmt: skip
    if redis:
        per_core = 1e6 / statistics.median(redis)
        numi_core = 1e6 / statistics.median([r["numi_us"] for r in two])
        rows += [
            row("scale-out CPU", "Redis CPU per delivered token", redis, "µs", "≤ 30",
                note="the whole redis-server: other clients of it count too"),
            row("scale-out CPU", "bound: tokens/s one Redis core carries", [per_core],
                "tokens/s", note=f"{per_core / 20:,.0f} streams at 20 tokens/s; one Numi "
                f"process at a full core ≈ {numi_core:,.0f} tokens/s, so Redis is the limit "
                f"past ≈ {per_core / numi_core:.1f} processes"),
        ]  # fmt: skip
    return rows


def three(runs: int = 3, streams: int = 40, tokens: int = 200) -> list[dict]:
    """Rows: 3 gunicorn workers (`gunicorn -k gevent -w 3`, as README deploys) against one
    `numi serve`, CPU per token summed over the processes, both on Redis and PostgreSQL;
    their ratio is the per-process overhead (each process's own reader, leases, pool)."""
    one, many = [], []
    for _ in range(runs):  # alternately, so drift hits both alike
        one.append(one_run(1, streams, tokens))
        many.append(one_run(3, streams, tokens, server="gunicorn"))
        print(f"    1 process {one[-1]}\n    3 workers {many[-1]}", flush=True)
    postgres = [r["postgres_turn_ms"] for r in one + many if r["postgres_turn_ms"] is not None]
    load = f"{streams} streams × {tokens} tokens at 20 tokens/s, Redis + PostgreSQL"
    rows = [
        row("scale-out CPU", f"Numi CPU per delivered token, 3 gunicorn workers (summed), {load}",
            [r["numi_us"] for r in many], "µs", note=f"lost {sum(r['lost'] for r in many)}; "
            f"1 process {statistics.median(r['numi_us'] for r in one):.0f} µs in the same runs"),
        row("scale-out CPU", "3 workers ÷ 1 process, CPU per token",
            [b["numi_us"] / a["numi_us"] for a, b in zip(one, many)], "×", "≤ 1.15"),
    ]  # fmt: skip
    if postgres:
        rows.append(
            row("scale-out CPU", "PostgreSQL CPU per turn (its backends for these processes)",
                postgres, "ms", note="a turn of this load: its start, its save and its end")
        )  # fmt: skip
    return rows


def main(argv: list[str]) -> None:
    from stats import table

    parser = argparse.ArgumentParser(prog="bench/scaleout_cpu.py", description=__doc__)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--three", action="store_true", help="3 gunicorn workers against 1 process")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    measure = three if args.three else cpu
    print(table(measure(args.runs, args.streams, args.tokens)))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
