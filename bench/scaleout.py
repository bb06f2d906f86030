"""Scale-out benchmarks: what the Redis turn channel adds per event, and `GET /` while 100
turns stream on PostgreSQL.

    python bench/run.py scaleout

Needs a Redis (NUMI_BENCH_REDIS_URL, default redis://127.0.0.1:6379/0) and, for the
PostgreSQL row, NUMI_BENCH_DATABASE_URL or NUMI_TEST_DATABASE_URL (a private schema is
made and dropped). Rows whose service is missing are left out with a note on stdout.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.request
import uuid

from live import LiveNumi
from numi.testing import Scenario, ScriptedProvider
from stats import percentile, row
import load
from turns import JsonSocket, token_latencies

# The benchmarks measure serving, not the single-user access token check.
OPEN = {"NUMI_AUTH": "none"}
REDIS_URL = os.environ.get("NUMI_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("NUMI_BENCH_DATABASE_URL") or os.environ.get("NUMI_TEST_DATABASE_URL", "")


def _redis_env() -> dict[str, str] | None:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        print(f"  no Redis at {REDIS_URL} ({exc}): Redis rows skipped")
        return None
    return {"NUMI_REDIS_URL": REDIS_URL, "NUMI_REDIS_PREFIX": f"numibench:{uuid.uuid4().hex[:8]}:"}


def _drop_keys(env: dict[str, str]) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=env["NUMI_REDIS_PREFIX"] + "*", count=1000))
    if keys:
        client.delete(*keys)


def per_event_latency(provider: ScriptedProvider, env: dict[str, str], turns: int = 3, tokens: int = 80) -> list[float]:
    """Provider write → client receipt per token, one event per token (no coalescing)."""
    values: list[float] = []
    with LiveNumi(NUMI_FRAME_INTERVAL_MS="0", **OPEN, **env) as numi:
        for turn in range(turns + 1):
            chat_id = numi.chat_on(provider.openai_base_url)
            socket = JsonSocket(numi, chat_id)
            provider.enqueue(Scenario().text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens)
                             .tokens_per_second(40))
            before = len(provider.requests)
            socket.send(type="send", message="Per event")
            events = list(socket.events())
            socket.close()
            latencies, _ = token_latencies(events, provider.requests[before])
            if turn:  # the first turn imports the SDK and warms the caches
                values.extend(latencies)
    return values


def redis_cost(provider: ScriptedProvider) -> list[dict]:
    env = _redis_env()
    if env is None:
        return []
    rows = []
    try:
        # Interleaved runs: the machine's noise hits both backends alike.
        memory, shared = [], []
        for _ in range(3):
            memory.append(percentile(per_event_latency(provider, {}), 50))
            shared.append(percentile(per_event_latency(provider, env), 50))
        added = [s - m for s, m in zip(shared, memory)]
        rows.append(row("scale-out", "per event, in-process channel, p50", memory, "ms"))
        rows.append(row("scale-out", "per event, Redis channel, p50", shared, "ms"))
        rows.append(row("scale-out", "Redis adds per event, p50", added, "ms", "≤ 2 ms"))
    finally:
        _drop_keys(env)
    return rows


def stop_from_another_process(provider: ScriptedProvider, runs: int = 7) -> list[dict]:
    """POST stop on process B → the `cancelled` error on a socket of process A (the turn's
    owner): the control message's trip through Redis pub/sub."""
    env = _redis_env()
    if env is None:
        return []
    values = []
    try:
        with LiveNumi(**OPEN, **env) as a:
            with LiveNumi(**OPEN, **env, NUMI_DATA_DIR=a.data_dir) as b:
                for run in range(runs + 1):
                    chat_id = a.chat_on(provider.openai_base_url)
                    socket = JsonSocket(a, chat_id)
                    provider.enqueue(Scenario().text("x " * 400, chunks=400).tokens_per_second(50))
                    socket.send(type="send", message="Stop me from elsewhere")
                    events = socket.events(until="content")
                    for _ in events:
                        pass
                    sent = time.perf_counter()
                    b.post(f"/api/chat/stop/{chat_id}", {})
                    for received, event in socket.events(until="turn_end"):
                        if event["type"] == "error":
                            if run:
                                values.append((received - sent) * 1000)
                    socket.close()
    finally:
        _drop_keys(env)
    return [row("scale-out", "stop on process B → cancelled on A's socket", values, "ms", "≤ 100 ms")]


def _postgres_schema():
    import sqlalchemy as sa

    name = "bench_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    url = sa.engine.make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={name}"})

    def drop():
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        engine.dispose()

    return url.render_as_string(hide_password=False), drop


def _turns(numi: LiveNumi, provider: ScriptedProvider, turns: int, tokens: int) -> float:
    """`turns` chats answering `tokens` tokens at 20/s at once (bench/load.py's clients);
    returns the p95 added latency per token in ms."""
    chats = [numi.chat_on(provider.openai_base_url) for _ in range(turns)]
    for _ in range(turns):
        provider.enqueue(load.paced(tokens))
    clients = load.Clients("json", numi.port, numi.url, [f"/ws/{c}" for c in chats], tokens)
    before = len(provider.requests)
    clients.go()
    seen, _ = clients.results()
    requests = {r.body["messages"][-1]["content"]: r for r in provider.requests[before:]}
    latencies = []
    for index, by_token in seen.items():
        stamps = requests[f"Turn {index}"].delta_times
        latencies += [(at - stamps[n]) * 1000 for n, at in by_token.items() if n < len(stamps)]
    return percentile(latencies, 95)


def _page_during_turns(provider: ScriptedProvider, label: str, **env: str) -> dict:
    """`GET /` every 50 ms while 100 turns stream at 20 tokens/s (two runs)."""
    with LiveNumi(**OPEN, **env) as numi:
        warm = numi.chat_on(provider.openai_base_url)
        socket = JsonSocket(numi, warm)
        provider.enqueue(Scenario().text("warm"))
        socket.send(type="send", message="warm up")
        list(socket.events())
        socket.close()
        timings: list[float] = []
        done = threading.Event()

        def load_pages():
            while not done.is_set():
                started = time.perf_counter()
                with urllib.request.urlopen(numi.url + "/", timeout=30) as response:
                    response.read()
                timings.append((time.perf_counter() - started) * 1000)
                time.sleep(0.05)

        runs = []
        for _ in range(2):
            timings.clear()
            done.clear()
            loader = threading.Thread(target=load_pages)
            loader.start()
            turns_p95 = _turns(numi, provider, turns=100, tokens=40)
            done.set()
            loader.join()
            runs.append((percentile(timings, 95), percentile(timings, 50), turns_p95))
    return row("scale-out", f"GET / during 100 turns on {label}, p95", [r[0] for r in runs], "ms",
               "≤ 100 ms" if label == "PostgreSQL" else "", note="p50 " + ", ".join(f"{r[1]:.0f}" for r in runs)
               + " ms; the turns' token p95 " + ", ".join(f"{r[2]:.0f}" for r in runs) + " ms")


def page_during_turns(provider: ScriptedProvider) -> list[dict]:
    """The PostgreSQL row, and SQLite in the same run as its reference."""
    if not POSTGRES_URL:
        print("  NUMI_BENCH_DATABASE_URL / NUMI_TEST_DATABASE_URL not set: PostgreSQL row skipped")
        return []
    url, drop = _postgres_schema()
    try:
        rows = [_page_during_turns(provider, "PostgreSQL", NUMI_DATABASE_URL=url)]
    finally:
        drop()
    rows.append(_page_during_turns(provider, "SQLite"))
    return rows


def measure() -> list[dict]:
    rows: list[dict] = []
    with ScriptedProvider() as provider:
        rows += redis_cost(provider)
        rows += stop_from_another_process(provider)
        rows += page_during_turns(provider)
    return rows
