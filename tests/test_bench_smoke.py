"""Issue 45's benchmarks, run tiny so that they cannot rot: each is the benchmark's own
code on the real components (live `numi serve`, the scripted provider, PostgreSQL,
Redis, a real Redis Cluster), at a size that proves it still measures, never how fast.
The figures themselves come from `bench/run.py` (README, "Benchmarks")."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

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


def test_the_sdk_memory_probe_and_rows_still_fit_the_modules_they_name():
    """The benchmark's parts, not its figure: its modules exist, its probe program runs in a
    fresh interpreter, and its rows take the probe's results. Importing the SDKs is what the
    benchmark measures; here it cost 39 s at load 30–46 for a figure nobody read
    (`python bench/run.py sdk-memory` measures it)."""
    import importlib.util

    import sdk_memory

    for name in (*sdk_memory.BASE, sdk_memory.ADAPTER, "openai"):
        assert importlib.util.find_spec(name) is not None, name
    # Where the beta types it counts live, found without importing anthropic.
    [sdk] = importlib.util.find_spec("anthropic").submodule_search_locations
    assert (Path(sdk) / "types" / "beta" / "__init__.py").exists()
    probe = sdk_memory.imported(("json",), ("email.message",))  # small stdlib modules
    assert probe["after"] >= probe["before"] > 0 and probe["beta"] == probe["anthropic"] == 0
    adapter = {**probe, "after": probe["before"] + 44.0, "anthropic": 900, "beta": 400}
    rows = _metrics(sdk_memory.rows([adapter], [probe], [probe]))
    row = rows["anthropic adapter's RSS after a server's imports (app, OpenAI adapters)"]
    assert row["median"] == pytest.approx(44.0)
    assert "900 anthropic modules loaded, 400 of them anthropic.types.beta" in row["note"]
    assert rows["`import anthropic` in a bare interpreter"]["median"] >= 0


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
def test_the_scaleout_cpu_parts_find_this_processs_postgresql_backend_and_redis():
    """The three-worker benchmark's own parts, on real PostgreSQL and Redis, without its
    run (a schema migrated by `numi db upgrade`, gunicorn with three workers importing the
    app, the provider and two load clients: 66 s at load 30–46, for figures nobody read;
    `python bench/run.py scaleout-three` runs it): the command README deploys, the
    PostgreSQL backend found for a process by its connection's port, Redis's process, and
    CPU per token summed over the named processes."""
    if not POSTGRES_URL:
        if IN_CI:
            pytest.fail("NUMI_TEST_DATABASE_URL is not set")
        pytest.skip("NUMI_TEST_DATABASE_URL is not set")
    redis_or_skip()
    import os

    import cluster
    import psycopg
    import scaleout_cpu

    gunicorn = cluster.GunicornNumi(3)
    shutil.rmtree(gunicorn.data_dir)  # made for a start that this test does not make
    command = gunicorn.command()
    assert Path(command[0]).name == "gunicorn" and command[-1] == "app:app"
    assert command[command.index("-w") + 1] == "3" and command[command.index("-k") + 1] == "gevent"
    assert (Path(cluster.ROOT) / "app.py").exists()

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(cluster, "REDIS_URL", REDIS_URL)
    monkeypatch.setattr(cluster, "POSTGRES_URL", POSTGRES_URL)
    try:
        before = set(cluster.postgres_backends([os.getpid()]))  # other tests' pools, if any
        with psycopg.connect(POSTGRES_URL.replace("postgresql+psycopg", "postgresql")) as conn:
            backend = conn.info.backend_pid
            assert backend not in before
            assert backend in cluster.postgres_backends([os.getpid()])
            assert backend not in cluster.postgres_backends([os.getppid()])
        redis_server = cluster.redis_pid()
    finally:
        monkeypatch.undo()
    if urlsplit(REDIS_URL).hostname in ("127.0.0.1", "localhost"):
        assert redis_server is not None and cluster.load.cpu_seconds(redis_server) > 0

    # capacity_level's shape: each process's CPU as % of the run's wall time.
    result = {"lost": 4, "wall": 2.0, "p95": 30.0,
              "cpu": {"worker 1": 50.0, "worker 2": 30.0, "worker 3": 20.0, "provider": 40.0,
                      "redis-server": 8.0, "postgres": 6.0, "load clients": 25.0}}  # fmt: skip
    figures = scaleout_cpu.per_token(result, 3, 20, ["worker 1", "worker 2", "worker 3"])
    assert figures["delivered"] == 56 and figures["lost"] == 4
    assert figures["numi_us"] == pytest.approx(2.0 / 56 * 1e6)  # 1 + 0.6 + 0.4 s of CPU
    assert figures["redis_us"] == pytest.approx(0.16 / 56 * 1e6)
    assert figures["postgres_turn_ms"] == pytest.approx(0.12 / 3 * 1e3)


def test_the_memory_rows_say_what_each_adapter_added():
    import memory

    rows = memory.measure(settle=0.0, turns=1)
    after = _metrics(rows)["RSS after 3 turns on all three adapters"]
    assert after["median"] > _metrics(rows)["idle RSS (10 s after ready)"]["median"]
    assert "anthropic +" in after["note"]
