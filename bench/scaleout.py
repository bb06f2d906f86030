"""Scale-out benchmarks: what the Redis turn channel adds per event, `GET /` while 100
turns stream on PostgreSQL, and how many concurrent streams one and two processes carry.

    python bench/run.py scaleout            # every row (the capacity search too)
    python bench/run.py scaleout-capacity   # the capacity search alone
    python bench/scaleout.py capacity --steps 25,50,100 --tokens 60 --runs 1 [--server gunicorn]
    python bench/scaleout.py cpu [--streams 40] [--tokens 200] [--runs 3]   # bench/scaleout_cpu.py

Needs a Redis (NUMI_BENCH_REDIS_URL, default redis://127.0.0.1:6379/0) and, for the
PostgreSQL row, NUMI_BENCH_DATABASE_URL or NUMI_TEST_DATABASE_URL (a private schema is
made and dropped). Rows whose service is missing are left out with a note on stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.request

import cluster
from live import LiveNumi
from numi.testing import Scenario, ScriptedProvider
from stats import percentile, row
import load
from turns import JsonSocket, token_latencies


def per_event_latency(
    provider: ScriptedProvider, env: dict[str, str], turns: int = 3, tokens: int = 80
) -> list[float]:
    """Provider write → client receipt per token, one event per token (no coalescing)."""
    values: list[float] = []
    with LiveNumi(NUMI_FRAME_INTERVAL_MS="0", **cluster.OPEN, **env) as numi:
        for turn in range(turns + 1):
            chat_id = numi.chat_on(provider.openai_base_url)
            socket = JsonSocket(numi, chat_id)
            provider.enqueue(
                Scenario()
                .text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens)
                .tokens_per_second(40)
            )
            before = len(provider.requests)
            socket.send(type="send", message="Per event")
            events = list(socket.events())
            socket.close()
            latencies, _ = token_latencies(events, provider.requests[before])
            if turn:  # the first turn imports the SDK and warms the caches
                values.extend(latencies)
    return values


def redis_cost(provider: ScriptedProvider) -> list[dict]:
    env = cluster.redis_env()
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
        cluster.drop_keys(env)
    return rows


def stop_from_another_process(provider: ScriptedProvider, runs: int = 7) -> list[dict]:
    """POST stop on process B → the `cancelled` error on a socket of process A (the turn's
    owner): the control message's trip through Redis pub/sub."""
    env = cluster.redis_env()
    if env is None:
        return []
    values = []
    try:
        with LiveNumi(**cluster.OPEN, **env) as a:
            with LiveNumi(**cluster.OPEN, **env, NUMI_DATA_DIR=a.data_dir) as b:
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
        cluster.drop_keys(env)
    return [
        row("scale-out", "stop on process B → cancelled on A's socket", values, "ms", "≤ 100 ms")
    ]


def _turns(
    numi: LiveNumi,
    provider: ScriptedProvider,
    turns: int,
    tokens: int,
    going: threading.Event | None = None,
) -> float:
    """`turns` chats answering `tokens` tokens at 20/s at once (bench/load.py's clients);
    returns the p95 added latency per token in ms. `going` is set as the clients send."""
    chats = [numi.chat_on(provider.openai_base_url) for _ in range(turns)]
    for _ in range(turns):
        provider.enqueue(load.paced(tokens))
    clients = load.Clients("json", numi.port, numi.url, [f"/ws/{c}" for c in chats], tokens)
    before = len(provider.requests)
    if going is not None:
        going.set()
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
    with LiveNumi(**cluster.OPEN, **env) as numi:
        warm = numi.chat_on(provider.openai_base_url)
        socket = JsonSocket(numi, warm)
        provider.enqueue(Scenario().text("warm"))
        socket.send(type="send", message="warm up")
        list(socket.events())
        socket.close()
        timings: list[float] = []
        going, done = threading.Event(), threading.Event()

        def load_pages():
            # From the sends on: making the chats and connecting the clients is not "during
            # turns" (and no turn runs yet).
            going.wait()
            while not done.is_set():
                started = time.perf_counter()
                with urllib.request.urlopen(numi.url + "/", timeout=30) as response:
                    response.read()
                timings.append((time.perf_counter() - started) * 1000)
                time.sleep(0.05)

        runs = []
        for _ in range(2):
            timings.clear()
            going.clear()
            done.clear()
            loader = threading.Thread(target=load_pages)
            loader.start()
            try:
                turns_p95 = _turns(numi, provider, turns=100, tokens=40, going=going)
            finally:
                going.set()  # a failed run must not leave the loader waiting
                done.set()
            loader.join()
            runs.append((percentile(timings, 95), percentile(timings, 50), turns_p95))
    return row(
        "scale-out",
        f"GET / during 100 turns on {label}, p95",
        [r[0] for r in runs],
        "ms",
        "≤ 100 ms" if label == "PostgreSQL" else "",
        note="p50 "
        + ", ".join(f"{r[1]:.0f}" for r in runs)
        + " ms; the turns' token p95 "
        + ", ".join(f"{r[2]:.0f}" for r in runs)
        + " ms",
    )


def page_during_turns(provider: ScriptedProvider) -> list[dict]:
    """The PostgreSQL row, and SQLite in the same run as its reference."""
    if not cluster.POSTGRES_URL:
        print("  NUMI_BENCH_DATABASE_URL / NUMI_TEST_DATABASE_URL not set: PostgreSQL row skipped")
        return []
    url, drop = cluster.postgres_schema()
    try:
        rows = [_page_during_turns(provider, "PostgreSQL", NUMI_DATABASE_URL=url)]
    finally:
        drop()
    rows.append(_page_during_turns(provider, "SQLite"))
    return rows


# --- capacity: concurrent 20-tokens/s streams carried by one process and by two ----------------

CAPACITY_STEPS = (25, 50, 100, 150, 200, 300, 400, 500, 600, 800)
CAPACITY_TOKENS = 100  # 5 s of tokens per turn
CAPACITY_P95_MS = 100.0


def _describe_level(result: dict) -> str:
    if "error" in result:
        return f"{result['streams']} streams: failed ({result['error']})"
    cpu = ", ".join(f"{name} {share:.0f}" for name, share in result["cpu"].items())
    trouble = "".join(
        [
            f", errors {result['errors']}" if result["errors"] else "",
            f", {result['unended']} turns without turn_end" if result["unended"] else "",
        ]
    )
    return (
        f"{result['streams']} streams: lost {result['lost']}{trouble}, p50 {result['p50']:.0f} ms,"
        f" p95 {result['p95']:.0f} ms, wall {result['wall']:.1f} s; CPU % of a core: {cpu}; Numi waited for a"
        f" core {' + '.join(f'{share:.0f}' for share in result['waited'].values())} % of the time;"
        f" level took {result['took']:.0f} s"
    )


def capacity_search(
    processes: int,
    server: str = "serve",
    steps=CAPACITY_STEPS,
    tokens: int = CAPACITY_TOKENS,
    env: dict[str, str] | None = None,
) -> dict:
    """The largest step whose p95 added latency is ≤ 100 ms with no token lost. A level
    that fails ends the search (the next would only fail slower)."""
    provider = cluster.PacedProvider(tokens)
    best, levels = None, []
    try:
        with cluster.started(server, processes, env or {}) as (servers, pids):
            # A first turn on every process imports the SDK and warms the caches.
            warm = cluster.capacity_level(servers, provider, len(servers), tokens, pids)
            if warm["lost"]:
                raise RuntimeError(f"the warm-up turns lost {warm['lost']} tokens")
            for streams in steps:
                try:
                    result = cluster.capacity_level(servers, provider, streams, tokens, pids)
                except Exception as exc:  # timed out, a client could not connect, …
                    result = {"streams": streams, "error": f"{type(exc).__name__}: {exc}"}
                levels.append(result)
                print(f"    {processes} × {server}: {_describe_level(result)}", flush=True)
                if (
                    "error" in result
                    or result["lost"]
                    or result["errors"]
                    or result["unended"]
                    or not result["p95"] <= CAPACITY_P95_MS
                ):
                    break
                best = result
    finally:
        provider.close()
    return {
        "capacity": best["streams"] if best else 0,
        "at": best,
        "levels": levels,
        "all_passed": bool(levels) and levels[-1] is best,
    }


def _cpu_note(result: dict) -> str:
    at = result["at"]
    if at is None:
        return "no step passed"
    numi = " + ".join(
        f"{share:.0f}"
        for name, share in at["cpu"].items()
        if name.startswith(("process", "worker"))
    )
    rest = ", ".join(
        f"{name} {share:.0f}"
        for name, share in at["cpu"].items()
        if not name.startswith(("process", "worker"))
    )
    waited = " + ".join(f"{share:.0f}" for share in at["waited"].values())
    return (
        f"at {at['streams']}: p95 {at['p95']:.0f} ms; CPU % of a core: Numi {numi}, {rest};"
        f" Numi waited for a core {waited} %"
        + ("; every step passed, raise --steps" if result["all_passed"] else "")
    )


def capacity(
    runs: int = 1,
    server: str = "serve",
    steps=CAPACITY_STEPS,
    tokens: int = CAPACITY_TOKENS,
    env: dict[str, str] | None = None,
) -> list[dict]:
    """One process against two, searched alternately `runs` times."""
    one, two = [], []
    for _ in range(runs):
        one.append(capacity_search(1, server, steps, tokens, env))
        two.append(capacity_search(2, server, steps, tokens, env))
    how = (
        "two `numi serve` on two ports, the clients' chats split evenly"
        if server == "serve"
        else "gunicorn -k gevent -w 1 and -w 2 on one port, the kernel's accept spreads the sockets"
    )
    cores = os.cpu_count()
    shared = (
        f"{cores} cores shared by the Numi processes, 2 load clients, the provider, Redis and PostgreSQL"
        + (": the ratio is bounded by the machine" if cores and cores < 6 else "")
    )
    ratios = [b["capacity"] / a["capacity"] for a, b in zip(one, two) if a["capacity"]]
    label = f"concurrent 20-tokens/s streams at p95 ≤ {CAPACITY_P95_MS:.0f} ms, 0 lost"
    return [
        row(
            "scale-out",
            f"{label}: 1 process",
            [r["capacity"] for r in one],
            "streams",
            note=f"{_cpu_note(one[-1])}; steps {','.join(map(str, steps))}, {tokens} tokens a turn",
        ),
        row(
            "scale-out",
            f"{label}: 2 processes",
            [r["capacity"] for r in two],
            "streams",
            note=f"{_cpu_note(two[-1])}; {how}",
        ),
        row(
            "scale-out",
            "2 processes ÷ 1 process, streams carried",
            ratios,
            "×",
            "≥ 1.7×",
            note=shared,
        ),
    ]


def _capacity_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="bench/scaleout.py capacity",
        description="How many 20-tokens/s streams one and two processes carry.",
    )
    parser.add_argument(
        "--steps",
        default=",".join(map(str, CAPACITY_STEPS)),
        help="stream counts to try, in order (default %(default)s)",
    )
    parser.add_argument(
        "--tokens", type=int, default=CAPACITY_TOKENS, help="tokens a turn, at 20/s"
    )
    parser.add_argument("--runs", type=int, default=1, help="searches per cluster size (median)")
    parser.add_argument("--server", choices=("serve", "gunicorn"), default="serve")
    parser.add_argument(
        "--processes", type=int, choices=(1, 2), help="search one cluster size only"
    )
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=value for every Numi process"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    steps = [int(step) for step in args.steps.split(",")]
    env = dict(item.split("=", 1) for item in args.env)
    if args.processes:
        result = capacity_search(args.processes, args.server, steps, args.tokens, env)
        print(
            f"capacity {result['capacity']}; {_cpu_note(result)} ({time.perf_counter() - started:.0f} s)"
        )
        return
    rows = capacity(args.runs, args.server, steps, args.tokens, env)
    for r in rows:
        print(
            f"{r['metric']}: median {r['median']:.2f} {r['unit']} (min {r['min']:.2f}, max {r['max']:.2f},"
            f" runs {r['runs']}); {r['note']}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


def measure() -> list[dict]:
    rows: list[dict] = []
    with ScriptedProvider() as provider:
        rows += redis_cost(provider)
        rows += stop_from_another_process(provider)
        rows += page_during_turns(provider)
    return rows + capacity()


if __name__ == "__main__":
    if sys.argv[1:2] == ["cpu"]:
        import scaleout_cpu  # which imports cluster, not this module

        scaleout_cpu.main(sys.argv[2:])
        sys.exit()
    if sys.argv[1:2] != ["capacity"]:
        sys.exit(__doc__)
    _capacity_main(sys.argv[2:])
