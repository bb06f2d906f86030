"""Relay cost of one fast stream: WebSocket messages, bytes per token and throughput,
with and without coalescing (NUMI_FRAME_INTERVAL_MS), for the HTML and JSON views.

    python bench/relay.py [--tokens 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from numi.testing.websocket_client import WebSocketClient as Client  # noqa: E402

from live import LiveNumi  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402


def one_run(numi: LiveNumi, provider: ScriptedProvider, tokens: int, html: bool) -> dict:
    chat_id = numi.chat_on(provider.openai_base_url)
    provider.enqueue(Scenario().text("tok " * tokens, chunks=tokens))
    suffix = "" if html else "?format=json"
    ws = Client.connect(
        f"ws://127.0.0.1:{numi.port}/ws/{chat_id}{suffix}", headers=numi.ws_headers()
    )
    if html:
        ws.send(json.dumps({"type": "resume", "last_event_id": None, "last_message_id": 0}))
    started = time.perf_counter()
    ws.send(json.dumps({"type": "send", "message": "go"}))
    messages = size = 0
    first = None
    while True:
        raw = ws.receive(timeout=60)
        messages += 1
        size += len(raw.encode())
        if first is None:
            first = time.perf_counter()
        if (html and 'data-running="0"' in raw) or (not html and '"turn_end"' in raw):
            break
    elapsed = time.perf_counter() - started
    ws.close()
    return {
        "messages": messages,
        "bytes_per_token": size / tokens,
        "messages_per_s": messages / elapsed,
        "tokens_per_s": tokens / elapsed,
        "seconds": elapsed,
    }


RAW = """
import sys, time
import httpx2
body = {"model": "bench-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
with httpx2.Client() as client:
    started = time.perf_counter()
    with client.stream("POST", sys.argv[1] + "/chat/completions", json=body) as response:
        count = sum(chunk.count(b'"content"') for chunk in response.iter_bytes())
    print(count / (time.perf_counter() - started))
"""


def direct_tokens_per_second(provider: ScriptedProvider, tokens: int) -> float:
    """The floor: the same stream read by httpx (the HTTP client the SDKs use) straight
    from the socket, in its own process as the server is, counting the tokens' frames."""
    import subprocess

    provider.enqueue(Scenario().text("tok " * tokens, chunks=tokens))
    output = subprocess.run(
        [sys.executable, "-c", RAW, provider.openai_base_url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.strip())


def measure(tokens: int = 10000, runs: int = 3) -> list[dict]:
    """Rows for bench/run.py: relay throughput as a ratio to a raw httpx read.

    A long stream, so that a turn's fixed costs (saving the question and the answer) do
    not stand in for throughput."""
    from stats import row

    out = []
    with ScriptedProvider() as provider:
        with LiveNumi(NUMI_FRAME_INTERVAL_MS=40) as numi:
            one_run(numi, provider, 50, html=False)
            for html in (False, True):
                ratios, sizes, speeds, floors = [], [], [], []
                for _ in range(runs):
                    direct = direct_tokens_per_second(provider, tokens)
                    result = one_run(numi, provider, tokens, html)
                    # Time per token over the floor's: > 1 means slower than the raw read.
                    ratios.append(direct / result["tokens_per_s"])
                    speeds.append(result["tokens_per_s"])
                    floors.append(direct)
                    sizes.append(result["bytes_per_token"])
                view = "HTML" if html else "JSON"
                out.append(
                    row(
                        "relay throughput",
                        f"{view} view, one stream of {tokens} tokens",
                        speeds,
                        "tokens/s",
                        "≤ 1.6× floor" if html else "≤ 1.25× floor",
                        ratio=ratios,
                        note=f"floor (raw httpx read) {statistics.median(floors):,.0f} tokens/s; "
                        f"{sorted(sizes)[len(sizes) // 2]:.1f} bytes/token",
                    )
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with ScriptedProvider() as provider:
        direct = statistics.median(
            direct_tokens_per_second(provider, args.tokens) for _ in range(args.runs)
        )
        for interval in (0, 40):
            with LiveNumi(NUMI_FRAME_INTERVAL_MS=interval) as numi:
                one_run(numi, provider, 50, html=False)  # warm up: SDK import, connections
                for html in (False, True):
                    runs = [one_run(numi, provider, args.tokens, html) for _ in range(args.runs)]
                    rows.append((interval, "html" if html else "json", runs))
    print(
        f"One fast stream of {args.tokens} tokens, median of {args.runs} runs "
        f"(raw httpx read of the stream: {direct:,.0f} tokens/s)\n"
    )
    print(
        "| frame interval | view | WS messages | messages/s | bytes/token | tokens/s | ratio to direct |"
    )
    print("|---|---|---|---|---|---|---|")
    for interval, view, runs in rows:
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"| {interval} ms | {view} | {med['messages']:.0f} | {med['messages_per_s']:.0f} | "
            f"{med['bytes_per_token']:.1f} | {med['tokens_per_s']:,.0f} | {med['tokens_per_s'] / direct:.2f} |"
        )


if __name__ == "__main__":
    main()
