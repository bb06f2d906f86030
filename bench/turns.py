"""Turn benchmarks against a live server and the scripted provider, all on loopback:
turn overhead (empty and long chats), added latency per token, reconnect time. Many
concurrent turns are bench/load.py's."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import time
from datetime import datetime

from numi.testing.websocket_client import WebSocketClient as Client

from live import LiveNumi
from numi.testing import Scenario, ScriptedProvider
from stats import percentile, row

TOKEN = re.compile(r"t(\d+) ")


class JsonSocket:
    def __init__(self, numi: LiveNumi, chat_id: str):
        self.ws = Client.connect(
            f"ws://127.0.0.1:{numi.port}/ws/{chat_id}?format=json", headers=numi.ws_headers()
        )

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
    rows = [
        (chat_id, "user" if i % 2 == 0 else "assistant", f"message {i} " + "lorem ipsum " * 20, now)
        for i in range(count)
    ]
    with sqlite3.connect(f"{numi.data_dir}/numi.db") as connection:
        connection.executemany(
            "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, ?)", rows
        )


def paced(tokens: int, rate: float) -> Scenario:
    # Equal-width tokens: the scenario splits text into equal chunks, one token each.
    return (
        Scenario()
        .text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens)
        .tokens_per_second(rate)
    )


def turn_overhead(numi: LiveNumi, provider: ScriptedProvider, runs: int) -> list[dict]:
    results = {}
    long_chat = numi.chat_on(provider.openai_base_url)
    add_messages(numi, long_chat, 5000)
    for label, chat_factory in (
        ("empty chat", lambda: numi.chat_on(provider.openai_base_url)),
        ("chat of 5,000 messages", lambda: long_chat),
    ):
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
    empty = results["empty chat"]
    # The floor for the long chat is the empty chat, measured in the same run.
    return [
        row(
            "turn overhead",
            f"send → provider request, {label}",
            values,
            "ms",
            "≤ 10 ms p50" if label == "empty chat" else "≤ 2× the empty chat's",
            note=f"p95 {percentile(values, 95):.1f} ms",
            ratio=None
            if label == "empty chat"
            else [statistics.median(values) / statistics.median(empty)],
        )
        for label, values in results.items()
    ]


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
        row(
            "added latency",
            "per token at 20 tokens/s, p50",
            [percentile(latencies, 50)],
            "ms",
            f"≤ {frame_ms + 5} ms",
        ),
        row(
            "added latency",
            "per token at 20 tokens/s, p95",
            [percentile(latencies, 95)],
            "ms",
            f"≤ {frame_ms + 25} ms",
        ),
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
    return [
        row(
            "reconnect",
            "resume with a last event id → first replayed event, mid-turn",
            values,
            "ms",
            "≤ 20 ms",
        )
    ]


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
    return rows
