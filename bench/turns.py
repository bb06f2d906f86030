"""Turn benchmarks against a live server and the scripted provider, all on loopback:
turn overhead, added latency per token, 100 concurrent turns, reconnect time."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import datetime

from simple_websocket import Client

from live import LiveNumi
from memory import rss_mib
from numi.testing import Scenario, ScriptedProvider
from stats import percentile, row

TOKEN = re.compile(r"t(\d+) ")


class JsonSocket:
    def __init__(self, numi: LiveNumi, chat_id: str):
        self.ws = Client.connect(f"ws://127.0.0.1:{numi.port}/ws/{chat_id}?format=json", headers={"Origin": numi.url})

    def send(self, **message) -> float:
        sent = time.perf_counter()
        self.ws.send(json.dumps(message))
        return sent

    def events(self, until: str = "turn_end", timeout: float = 60):
        """Yield (receive time, event) up to and including the `until` event."""
        while True:
            raw = self.ws.receive(timeout=timeout)
            if raw is None:
                raise TimeoutError(until)
            received = time.perf_counter()
            event = json.loads(raw)
            yield received, event
            if event["type"] == until:
                return

    def close(self):
        self.ws.close()


def add_messages(numi: LiveNumi, chat_id: str, count: int) -> None:
    """Grow a chat to `count` messages directly in the database (as years of use would)."""
    now = datetime.utcnow().isoformat(" ")
    rows = [(chat_id, "user" if i % 2 == 0 else "assistant", f"message {i} " + "lorem ipsum " * 20, now)
            for i in range(count)]
    with sqlite3.connect(f"{numi.data_dir}/numi.db") as connection:
        connection.executemany("INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, ?)", rows)


def paced(tokens: int, rate: float) -> Scenario:
    # Equal-width tokens: the scenario splits text into equal chunks, one token each.
    return Scenario().text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens).tokens_per_second(rate)


def turn_overhead(numi: LiveNumi, provider: ScriptedProvider, runs: int) -> list[dict]:
    results = {}
    long_chat = numi.chat_on(provider.openai_base_url)
    add_messages(numi, long_chat, 5000)
    for label, chat_factory in (("empty chat", lambda: numi.chat_on(provider.openai_base_url)),
                                ("chat of 5,000 messages", lambda: long_chat)):
        values = []
        for _ in range(runs):
            chat_id = chat_factory()
            socket = JsonSocket(numi, chat_id)
            provider.enqueue(Scenario().text("ok"))
            before = len(provider.requests)
            sent = socket.send(type="send", message="How long until you hear me?")
            for _received, _event in socket.events():
                pass
            socket.close()
            values.append((provider.requests[before].received_at - sent) * 1000)
        results[label] = values
    return [row("turn overhead", f"send → provider request, {label}", values, "ms",
                "≤ 10 ms p50" if label == "empty chat" else "≤ 25 ms p50",
                note=f"p95 {percentile(values, 95):.1f} ms")
            for label, values in results.items()]


def token_latencies(events, request, by_index: dict | None = None) -> tuple[list[float], int]:
    """Per-token delay (ms) from the provider's write to the client's receipt, and the
    number of tokens received (`by_index` collects the delays per token position)."""
    latencies, seen = [], 0
    for received, event in events:
        if event["type"] != "content":
            continue
        for match in TOKEN.finditer(event["data"]["delta"]):
            index = int(match.group(1))
            seen += 1
            if index < len(request.delta_times):
                latencies.append((received - request.delta_times[index]) * 1000)
                if by_index is not None:
                    by_index.setdefault(index, []).append(latencies[-1])
    return latencies, seen


def added_latency(numi: LiveNumi, provider: ScriptedProvider, frame_ms: int) -> list[dict]:
    chat_id = numi.chat_on(provider.openai_base_url)
    socket = JsonSocket(numi, chat_id)
    provider.enqueue(paced(60, 20))
    before = len(provider.requests)
    socket.send(type="send", message="Slowly, please")
    events = list(socket.events())
    socket.close()
    latencies, _ = token_latencies(events, provider.requests[before])
    return [
        row("added latency", "per token at 20 tokens/s, p50", [percentile(latencies, 50)], "ms", f"≤ {frame_ms + 5} ms"),
        row("added latency", "per token at 20 tokens/s, p95", [percentile(latencies, 95)], "ms", f"≤ {frame_ms + 25} ms"),
    ]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CLIENT_WORKER = """
import json, sys, threading, time
from simple_websocket import Client

port, origin = int(sys.argv[1]), sys.argv[2]
jobs = json.loads(sys.stdin.readline())  # [[index, chat_id], ...]
sockets = {i: Client.connect(f"ws://127.0.0.1:{port}/ws/{chat}?format=json", headers={"Origin": origin})
           for i, chat in jobs}
received = {i: [] for i, _ in jobs}
print("ready", flush=True)
sys.stdin.readline()  # go


def drive(i):
    ws = sockets[i]
    ws.send(json.dumps({"type": "send", "message": f"Turn {i}"}))
    while True:
        raw = ws.receive(timeout=120)
        at = time.perf_counter()  # CLOCK_MONOTONIC: comparable with the provider's stamps
        event = json.loads(raw)
        if event["type"] == "content":
            received[i].append([at, event["data"]["delta"]])
        if event["type"] == "turn_end":
            return


threads = [threading.Thread(target=drive, args=(i,)) for i in sockets]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for ws in sockets.values():
    ws.close()
print(json.dumps(received), flush=True)
"""


def concurrency(numi: LiveNumi, provider: ScriptedProvider, turns: int = 100, tokens: int = 40,
                workers: int = 4) -> list[dict]:
    """`turns` simultaneous turns, their clients spread over `workers` processes so that the
    clients' own scheduling does not stand in for the server's latency."""
    import subprocess
    import sys

    chats = [numi.chat_on(provider.openai_base_url) for _ in range(turns)]
    for _ in range(turns):
        provider.enqueue(paced(tokens, 20))
    procs = []
    for w in range(workers):
        proc = subprocess.Popen([sys.executable, "-c", CLIENT_WORKER, str(numi.port), numi.url],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        proc.stdin.write(json.dumps([[i, chats[i]] for i in range(w, turns, workers)]) + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ready"
        procs.append(proc)
    time.sleep(1)
    rss_before = rss_mib(numi.proc.pid)
    cpu_before, wall_before = _cpu_seconds(numi.proc.pid), time.perf_counter()
    before = len(provider.requests)
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    time.sleep(tokens / 20 / 2)  # mid-stream: every turn is running
    rss_peak = rss_mib(numi.proc.pid)
    received: dict[str, list] = {}
    for proc in procs:
        received.update(json.loads(proc.stdout.readline()))
        proc.wait(30)
    cpu = _cpu_seconds(numi.proc.pid) - cpu_before
    wall = time.perf_counter() - wall_before
    requests = {r.body["messages"][-1]["content"]: r for r in provider.requests[before:]}
    latencies, lost, by_position = [], 0, {}
    for index, deltas in received.items():
        request = requests[f"Turn {index}"]
        events = [(at, {"type": "content", "data": {"delta": delta}}) for at, delta in deltas]
        values, seen = token_latencies(events, request, by_position)
        latencies.extend(values)
        lost += tokens - seen
    return [
        row("concurrency", f"{turns} turns at 20 tokens/s: tokens lost", [lost], "", "0"),
        row("concurrency", "p95 added latency", [percentile(latencies, 95)], "ms", "≤ 100 ms",
            note=f"p50 {percentile(latencies, 50):.1f} ms; p95 of the first token "
                 f"{percentile(by_position.get(0, []), 95):.0f} ms, after it "
                 f"{percentile([v for k, vs in by_position.items() if k > 0 for v in vs], 95):.0f} ms"),
        row("concurrency", "server CPU", [cpu / wall * 100], "% of one core"),
        row("concurrency", "RSS growth per running turn", [(rss_peak - rss_before) / turns * 1024], "KiB", "≤ 1024 KiB"),
    ]


def reconnect(numi: LiveNumi, provider: ScriptedProvider, runs: int = 10) -> list[dict]:
    chat_id = numi.chat_on(provider.openai_base_url)
    watcher = JsonSocket(numi, chat_id)
    provider.enqueue(paced(200, 40))
    watcher.send(type="send", message="A long answer")
    seen = []
    values = []
    stream = watcher.events()
    for _received, event in stream:
        seen.append(event)
        if len(seen) >= 20:
            break
    for i in range(runs):
        resume_from = seen[-5]["event_id"]
        socket = JsonSocket(numi, chat_id)
        sent = socket.send(type="resume", last_event_id=resume_from)
        received, event = next(socket.events())
        values.append((received - sent) * 1000)
        assert event["event_id"] == resume_from + 1, event
        socket.close()
    for _received, _event in stream:
        pass
    watcher.close()
    return [row("reconnect", "resume with a last event id → first replayed event, mid-turn", values, "ms", "≤ 20 ms")]


def measure() -> list[dict]:
    rows = []
    with ScriptedProvider() as provider:
        with LiveNumi() as numi:
            warm = numi.chat_on(provider.openai_base_url)  # first turn imports the SDK
            socket = JsonSocket(numi, warm)
            socket.send(type="send", message="warm up")
            list(socket.events())
            socket.close()
            rows += turn_overhead(numi, provider, runs=15)
            rows += added_latency(numi, provider, frame_ms=40)
            rows += reconnect(numi, provider)
            # One run of 100 synchronised turns varies a lot on 2 shared cores: take several.
            runs = [concurrency(numi, provider) for _ in range(3)]
            for index, first in enumerate(runs[0]):
                values = [run[index]["median"] for run in runs]
                rows.append({**first, "median": sorted(values)[1], "min": min(values), "max": max(values),
                             "runs": len(values), "note": first["note"] if index != 1 else
                             "p95 per run: " + ", ".join(f"{v:.0f}" for v in values) + " ms"})
    return rows
