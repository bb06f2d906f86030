"""The scale-out model (issue 45): from the CPU that Numi, Redis and PostgreSQL spend per
delivered token and per turn, measured here on PostgreSQL + Redis, how many Numi
processes, Redis cores and PostgreSQL cores carry 1,000, 10,000 and 100,000 concurrent
20-tokens/s streams, which component saturates first, and how many streams one process
carries.

    python bench/scaleout_model.py [--streams 40] [--tokens 200] [--runs 3]
    python bench/scaleout_model.py --numi-us 230 --redis-us 30 --postgres-ms 4   # no run

The model is CPU accounting, not a simulation of queues: each component is given a share
of its cores (`UTILISATION`) so that the latency of a busy core stays in budget (the
capacity rows of bench/scaleout.py show p95 within 100 ms below about 70 % of a core).
A stream is a chat answering turns of `tokens` tokens one after another, so its turn
cost is paid every tokens / 20 seconds: a user who reads between turns costs less, so
these are the counts for the busiest hour, not for the head count.

What the model leaves out, on purpose, and where each would bite:
- one Redis server is one core (its commands run on one thread): past one core, Numi's
  turn table needs a Redis Cluster, and a process then reads each hash-tag group apart
  (`numi.turns.redis_keys.READERS`), whose cost per process the 16 groups multiply;
- PostgreSQL's cores are those of one primary (every turn writes): past a primary's
  cores, the chats would have to be partitioned by user across databases;
- the network, the load balancer and TLS: they cost per byte, outside these processes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass

from numi.turns.redis_keys import GROUPS
from stats import row

RATE = 20.0  # tokens per second of one stream
UTILISATION = 0.7  # the share of each core the model fills
SIZES = (1_000, 10_000, 100_000)
# A Redis server runs its commands on one thread, so one node is at most one core.
REDIS_CORES_PER_NODE = 1
# The cores of one PostgreSQL primary the model assumes (every turn writes to it).
PRIMARY_CORES = 8


@dataclass(frozen=True)
class Costs:
    """Measured CPU: Numi's and Redis's per delivered token (µs, Numi's includes its share
    of each turn's start and end at `tokens` a turn), PostgreSQL's per turn (ms)."""

    numi_us: float
    redis_us: float
    postgres_ms: float
    tokens: int


@dataclass(frozen=True)
class Plan:
    streams: int
    processes: int
    redis_cores: float
    redis_nodes: int
    postgres_cores: float
    first: str  # the component that saturates first as streams grow


def streams_per_core(costs: Costs) -> dict[str, float]:
    """Concurrent streams one core of each component carries at `UTILISATION`."""
    per_stream = {
        "Numi process": RATE * costs.numi_us / 1e6,
        "Redis": RATE * costs.redis_us / 1e6,
        "PostgreSQL": costs.postgres_ms / 1e3 / (costs.tokens / RATE),
    }
    return {name: UTILISATION / cpu if cpu > 0 else math.inf for name, cpu in per_stream.items()}


def plan(costs: Costs, streams: int, postgres_cores: int = PRIMARY_CORES) -> Plan:
    """What `streams` concurrent streams need. "First" is the component whose one unit
    fills first: Redis at one node (one core), PostgreSQL at `postgres_cores` (one
    primary), or a Numi process, which scales out freely and so only comes first when
    neither limit is reached."""
    per_core = streams_per_core(costs)
    redis_cores = streams / per_core["Redis"]
    pg_cores = streams / per_core["PostgreSQL"]
    limits = {
        "Redis": per_core["Redis"] * REDIS_CORES_PER_NODE,
        "PostgreSQL": per_core["PostgreSQL"] * postgres_cores,
    }
    first = min(limits, key=lambda name: limits[name])
    return Plan(
        streams=streams,
        processes=math.ceil(streams / per_core["Numi process"]),
        redis_cores=redis_cores,
        redis_nodes=math.ceil(redis_cores / REDIS_CORES_PER_NODE),
        postgres_cores=pg_cores,
        first=f"{first} at {limits[first]:,.0f} streams",
    )


def rows_for(costs: Costs, note: str = "") -> list[dict]:
    """The model's rows for bench/run.py, from one set of measured costs."""
    per_core = streams_per_core(costs)
    basis = (
        f"from Numi {costs.numi_us:.0f} µs and Redis {costs.redis_us:.1f} µs per token, "
        f"PostgreSQL {costs.postgres_ms:.2f} ms per turn of {costs.tokens} tokens; each core "
        f"at {UTILISATION:.0%}"
    )
    rows = [
        row("scale-out model", "concurrent 20-tokens/s streams per Numi process (one core)",
            [per_core["Numi process"]], "streams", note=basis + (f"; {note}" if note else "")),
        row("scale-out model", "concurrent streams per Redis core (one node)",
            [per_core["Redis"]], "streams"),
        row("scale-out model", "concurrent streams per PostgreSQL core",
            [per_core["PostgreSQL"]], "streams"),
    ]  # fmt: skip
    for streams in SIZES:
        need = plan(costs, streams)
        # Chats are spread over GROUPS hash tags, so at most GROUPS masters share them.
        beyond = (
            f"; more than the {GROUPS} hash-tag groups: past "
            f"{per_core['Redis'] * GROUPS:,.0f} streams Numi needs more groups"
            if need.redis_nodes > GROUPS
            else ""
        )
        if need.postgres_cores > PRIMARY_CORES:
            beyond += f"; more than one {PRIMARY_CORES}-core PostgreSQL primary"
        rows.append(
            row("scale-out model", f"{streams:,} concurrent streams: Numi processes",
                [need.processes], "processes",
                note=f"Redis {need.redis_cores:.1f} cores ({need.redis_nodes} "
                f"node{'s' if need.redis_nodes > 1 else ''}), PostgreSQL "
                f"{need.postgres_cores:.1f} cores; first to saturate: {need.first}{beyond}")
        )  # fmt: skip
    return rows


def measured_costs(runs: int, streams: int, tokens: int) -> tuple[list[Costs], str]:
    """Costs from `runs` runs of one `numi serve` on Redis and PostgreSQL (bench/scaleout_cpu.py)."""
    import scaleout_cpu

    found = []
    for _ in range(runs):
        result = scaleout_cpu.one_run(1, streams, tokens)
        if result["redis_us"] is None or result["postgres_turn_ms"] is None:
            raise RuntimeError("the model needs Redis and PostgreSQL on this machine")
        found.append(
            Costs(result["numi_us"], result["redis_us"], result["postgres_turn_ms"], tokens)
        )
        print(f"    {found[-1]}, lost {result['lost']}", flush=True)
    return found, f"{streams} streams × {tokens} tokens, median of {runs} runs"


def median_costs(found: list[Costs]) -> Costs:
    return Costs(
        statistics.median(c.numi_us for c in found),
        statistics.median(c.redis_us for c in found),
        statistics.median(c.postgres_ms for c in found),
        found[0].tokens,
    )


def measure(runs: int = 3, streams: int = 40, tokens: int = 200) -> list[dict]:
    """Rows for bench/run.py: the model from costs measured in this run."""
    found, note = measured_costs(runs, streams, tokens)
    spread = (
        f"Numi {min(c.numi_us for c in found):.0f}–{max(c.numi_us for c in found):.0f} µs, "
        f"Redis {min(c.redis_us for c in found):.1f}–{max(c.redis_us for c in found):.1f} µs, "
        f"PostgreSQL {min(c.postgres_ms for c in found):.2f}–"
        f"{max(c.postgres_ms for c in found):.2f} ms"
    )
    return rows_for(median_costs(found), f"{note} ({spread})")


def main(argv: list[str]) -> None:
    from stats import table

    parser = argparse.ArgumentParser(prog="bench/scaleout_model.py", description=__doc__)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--numi-us", type=float, help="skip the run: Numi µs per token")
    parser.add_argument("--redis-us", type=float, default=30.0)
    parser.add_argument("--postgres-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.numi_us is not None:
        costs = Costs(args.numi_us, args.redis_us, args.postgres_ms, args.tokens)
        print(table(rows_for(costs, "given on the command line")))
        return
    print(table(measure(args.runs, args.streams, args.tokens)))


if __name__ == "__main__":
    main(sys.argv[1:])
