"""Issue 45's benchmarks, run tiny so that they cannot rot: each is the benchmark's own
code on the real components (live `numi serve`, the scripted provider, PostgreSQL,
Redis, a real Redis Cluster), at a size that proves it still measures, never how fast.
The figures themselves come from `bench/run.py` (README, "Benchmarks")."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fixtures import IN_CI, POSTGRES_URL, REDIS_URL
from fixtures.redis_server import redis_or_skip

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import scaleout_model  # noqa: E402
from scaleout_model import Costs  # noqa: E402


def _metrics(rows: list[dict]) -> dict[str, dict]:
    return {r["metric"]: r for r in rows}


def test_the_model_counts_processes_and_names_redis_first_when_postgresql_is_cheap():
    costs = Costs(numi_us=250.0, redis_us=35.0, postgres_ms=2.0, tokens=100)
    per_core = scaleout_model.streams_per_core(costs)
    # 20 tokens/s × 250 µs = 5 ms of CPU a second per stream: 140 streams at 70 % of a core.
    assert per_core["Numi process"] == pytest.approx(140)
    need = scaleout_model.plan(costs, 10_000)
    assert need.processes == 72
    assert need.redis_nodes == 10
    assert need.first.startswith("Redis at 1,000 streams")


def test_the_model_names_postgresql_first_when_turns_cost_it_more():
    # A turn of 20 tokens (1 s) at 50 ms of PostgreSQL: 14 streams a core, 112 on 8 cores.
    need = scaleout_model.plan(Costs(250.0, 1.0, 50.0, 20), 1_000)
    assert need.first.startswith("PostgreSQL at 112 streams")


def test_the_model_says_when_redis_needs_more_hash_tag_groups_than_numi_has():
    rows = scaleout_model.rows_for(Costs(250.0, 35.0, 2.0, 100))
    notes = {r["metric"].split(" concurrent")[0]: r["note"] for r in rows}
    assert "Numi needs more groups" in notes["100,000"]
    assert "Numi needs more groups" not in notes["1,000"]


def test_the_model_says_when_postgresql_needs_more_than_one_primary():
    # 10 ms a turn of 10 s: 1 ms of CPU a second per stream, 700 streams a core at 70 %.
    notes = {r["metric"]: r["note"] for r in scaleout_model.rows_for(Costs(375.0, 38.7, 10.0, 200))}
    assert (
        "more than one 8-core PostgreSQL primary"
        in notes["10,000 concurrent streams: Numi processes"]
    )
    assert "PostgreSQL primary" not in notes["1,000 concurrent streams: Numi processes"]


def test_the_anthropic_sdk_memory_rows_count_its_beta_types():
    import sdk_memory

    # What a server imports first, cut down to the OpenAI adapter: the rows, not the figure.
    rows = _metrics(sdk_memory.measure(runs=1, base=("numi.providers.openai_chat",)))
    adapter = rows["anthropic adapter's RSS after a server's imports (app, OpenAI adapters)"]
    assert adapter["median"] > 0
    assert "anthropic.types.beta" in adapter["note"]
    assert rows["`import anthropic` in a bare interpreter"]["median"] > 0


def test_a_redis_cluster_keeps_each_chat_in_one_slot_and_spreads_the_chats():
    import redis_cluster

    why = redis_cluster.available()
    if why:
        if IN_CI:
            pytest.fail(f"the Redis Cluster benchmark must run in CI: {why}")
        pytest.skip(why)
    result = redis_cluster.spread(chats=60, nodes=3)
    assert result["control_refused"], "a command over two groups' keys was not refused"
    assert result["refused"] == 0
    assert sum(result["per_node"]) == 60
    assert all(count > 0 for count in result["per_node"])


@pytest.mark.slow(reason="an echo server, a live numi serve and two load-client processes")
def test_the_load_rows_stream_every_token_and_read_memory_after():
    import load

    rows = _metrics(load.capacity(runs=1, turns=2, tokens=30, views=("json",)))
    label = "2 turns at 20 tokens/s, JSON view"
    assert rows[f"{label}: tokens lost"]["median"] == 0
    assert rows[f"{label}: p95 added latency"]["ratio"] is not None  # beside its echo floor
    assert rows[f"{label}: server RSS once the turns have ended"]["median"] > 0


@pytest.mark.postgres
@pytest.mark.slow(
    reason="a PostgreSQL schema migrated, gunicorn with 3 workers, the provider and clients"
)
def test_three_workers_on_postgresql_and_redis_count_every_process_and_postgresql():
    if not POSTGRES_URL:
        if IN_CI:
            pytest.fail("NUMI_TEST_DATABASE_URL is not set")
        pytest.skip("NUMI_TEST_DATABASE_URL is not set")
    redis_or_skip()
    if shutil.which("gunicorn") is None and not Path(sys.executable).with_name("gunicorn").exists():
        pytest.skip("gunicorn is not installed")
    import cluster
    import scaleout_cpu

    # The benchmark's own Redis setting, pointed at the test Redis.
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(cluster, "REDIS_URL", REDIS_URL)
    monkeypatch.setattr(cluster, "POSTGRES_URL", POSTGRES_URL)
    try:
        result = scaleout_cpu.one_run(3, 3, 20, server="gunicorn")
    finally:
        monkeypatch.undo()
    assert result["lost"] == 0
    assert result["numi_us"] > 0
    assert result["postgres_turn_ms"] is not None and result["postgres_turn_ms"] > 0


def test_the_memory_rows_say_what_each_adapter_added():
    import memory

    rows = memory.measure(settle=0.0, turns=1)
    after = _metrics(rows)["RSS after 3 turns on all three adapters"]
    assert after["median"] > _metrics(rows)["idle RSS (10 s after ready)"]["median"]
    assert "anthropic +" in after["note"]
