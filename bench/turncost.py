"""The turn's fixed cost: server CPU per turn outside the model stream (issue 27).

    python bench/turncost.py [--turns 200] [--runs 3] [--profile FILE]

A live Numi (JSON view) and the scripted provider on loopback. `--turns` chats are made and
their WebSockets connected first; then, one after the other, each chat sends one question
and reads its events to `turn_end`. The server's CPU time (user + system, from /proc) over
those turns, divided by the turns, is what one turn costs from its `send` to its last save:
the owner check, `start_turn`, the chat and route lookups, the history, saving the
question, building the SDK request, the provider's stream, saving the answer and the
events that tell the client. Not in it: the WebSocket handshake (done before) and titles
(off, as in every benchmark).

The stream's own cost is taken out: the same run has a second set of turns whose answer
has `LONG` tokens instead of one, and the CPU per extra token, (long − short) / extra
tokens, times the tiny answer's one token, is subtracted. What is left is the fixed cost.
SQL statements and commits per turn come from bench/probe.py inside the server.

`--profile FILE` adds a run with bench/cprofiler.py loaded, and writes a cProfile of its
short turns to FILE (pstats; read it with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import probe  # noqa: E402
from live import LiveNumi  # noqa: E402
from load import cpu_seconds  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402
from numi.testing.websocket_client import WebSocketClient as Client  # noqa: E402
from stats import row  # noqa: E402

LONG = 41  # tokens of the long answer (40 more than the tiny one)


def _server(profile: str | None) -> LiveNumi:
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    plugins = "probe,cprofiler" if profile else "probe"
    env = {"NUMI_PLUGINS": plugins, "PYTHONPATH": path}
    if profile:
        env["NUMI_BENCH_CPROFILE"] = str(Path(profile).resolve())
    return LiveNumi(**env)


def _connect(numi: LiveNumi, chat_id: str) -> Client:
    return Client.connect(
        f"ws://127.0.0.1:{numi.port}/ws/{chat_id}?format=json", headers=numi.ws_headers()
    )


def _turn(socket: Client, n: int) -> None:
    # With a request_id, as the page sends (a resend is then recognised, not answered twice).
    socket.send(
        json.dumps(
            {"type": "send", "message": f"Question {n}, briefly?", "request_id": uuid.uuid4().hex}
        )
    )
    while True:
        raw = socket.receive(timeout=60)
        if raw is None:
            raise TimeoutError("no turn_end")
        event = json.loads(raw)
        if event["type"] == "turn_end":
            return


def _settled(numi: LiveNumi) -> dict:
    """The probe's counters once it has written them after the last turn (every 0.5 s)."""
    asked = time.perf_counter()
    while True:
        reading = probe.read(numi.data_dir)
        if reading["clock"] > asked:
            return reading
        time.sleep(0.1)


def _batch(numi, provider, turns: int, scenario, profile: bool = False) -> dict:
    """CPU, statements and commits per turn over `turns` sequential turns of `scenario`."""
    chats = [numi.chat_on(provider.openai_base_url) for _ in range(turns)]
    sockets = [_connect(numi, chat_id) for chat_id in chats]
    for _ in range(turns):
        provider.enqueue(scenario())
    time.sleep(0.3)
    before = _settled(numi)
    cpu0 = cpu_seconds(numi.proc.pid)
    if profile:
        os.kill(numi.proc.pid, signal.SIGUSR1)
    started = time.perf_counter()
    for n, socket in enumerate(sockets):
        _turn(socket, n)
    wall = time.perf_counter() - started
    if profile:
        os.kill(numi.proc.pid, signal.SIGUSR2)
    cpu = cpu_seconds(numi.proc.pid) - cpu0
    after = _settled(numi)
    for socket in sockets:
        socket.close()
    return {
        "cpu_ms": cpu / turns * 1000,
        "wall_ms": wall / turns * 1000,
        "statements": (after["db_calls"] - before["db_calls"]) / turns,
        "commits": (after["db_commits"] - before["db_commits"]) / turns,
    }


def run(turns: int = 200, profile: str | None = None) -> dict:
    with ScriptedProvider() as provider, _server(profile) as numi:
        warm = numi.chat_on(provider.openai_base_url)  # the first turn imports the SDK
        socket = _connect(numi, warm)
        for n in range(3):
            provider.enqueue(Scenario().text("ok"))
            _turn(socket, n)
        socket.close()
        long_answer = "".join(f"w{i:02d} " for i in range(LONG))
        long = _batch(numi, provider, turns, lambda: Scenario().text(long_answer, chunks=LONG))
        short = _batch(
            numi, provider, turns, lambda: Scenario().text("ok"), profile=profile is not None
        )
    per_token = (long["cpu_ms"] - short["cpu_ms"]) / (LONG - 1)
    return {
        "fixed_ms": short["cpu_ms"] - per_token,
        "short_ms": short["cpu_ms"],
        "long_ms": long["cpu_ms"],
        "per_token_us": per_token * 1000,
        "wall_ms": short["wall_ms"],
        "statements": short["statements"],
        "commits": short["commits"],
    }


def measure(runs: int = 3, turns: int = 200) -> list[dict]:
    """Rows for bench/run.py."""
    results = [run(turns) for _ in range(runs)]
    median = statistics.median
    return [
        row(
            "turn fixed cost",
            f"server CPU per turn outside the stream, {turns} sequential turns, JSON view",
            [r["fixed_ms"] for r in results],
            "ms",
            "≤ 10 ms",
            note=f"per turn of a one-token answer {median(r['short_ms'] for r in results):.1f} ms, "
            f"stream {median(r['per_token_us'] for r in results):.0f} µs per token; "
            f"{median(r['statements'] for r in results):.0f} SQL statements and "
            f"{median(r['commits'] for r in results):.0f} commits per turn; "
            f"wall {median(r['wall_ms'] for r in results):.1f} ms per turn",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", help="cProfile an extra run's short turns into this file")
    args = parser.parse_args()
    results = []
    for _ in range(args.runs):
        results.append(run(args.turns))
        print(", ".join(f"{k} {v:.2f}" for k, v in results[-1].items()), flush=True)
    for key in ("fixed_ms", "short_ms", "per_token_us", "statements", "commits"):
        if results:
            print(f"median {key}: {statistics.median(r[key] for r in results):.2f}")
    if args.profile:  # an extra run: the profiler's own cost stays out of the medians
        profiled = run(args.turns, args.profile)
        print(f"profiled run (not in the medians): short_ms {profiled['short_ms']:.2f}")


if __name__ == "__main__":
    main()
