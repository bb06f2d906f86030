"""Compare's cost: the server's CPU per streamed token of one 3-lane compare turn, against
the same three answers as 3 separate chats answering at the same time (the floor).

A lane is a whole turn loop in a greenlet of the compare turn, on the turn's channel: this
measures what that sharing costs (or saves) per token. Both sides stream the same three
answers of `--tokens` tokens through the scripted provider and the real SDK to a JSON
WebSocket client; the server's CPU (user + system, from /proc) is read before the send and
after the last `turn_end`. Long answers, so that the turns' fixed costs (one question saved
for the compare, three for the chats) weigh little. Target: ≤ 1.1× the 3 chats.

    python bench/compare.py [--tokens 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from numi.testing.websocket_client import WebSocketClient as Client  # noqa: E402

from live import LiveNumi  # noqa: E402
from load import cpu_seconds  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402

MODELS = ("bench-a", "bench-b", "bench-c")


def _socket(numi: LiveNumi, chat_id: str) -> Client:
    return Client.connect(
        f"ws://127.0.0.1:{numi.port}/ws/{chat_id}?format=json", headers=numi.ws_headers()
    )


def _wait_for_turn_end(ws: Client) -> int:
    """Read until the turn ends; the number of content events seen."""
    contents = 0
    while True:
        raw = ws.receive(timeout=120)
        if raw is None:
            raise RuntimeError("no turn_end within 120 s")
        if '"type":"content"' in raw:
            contents += 1
        if '"type":"turn_end"' in raw:
            return contents


def _enqueue(provider: ScriptedProvider, tokens: int) -> None:
    for model in MODELS:
        provider.enqueue(Scenario().text("tok " * tokens, chunks=tokens), model=model)


def compare_run(numi: LiveNumi, provider: ScriptedProvider, endpoint_id: int, tokens: int) -> float:
    """Server CPU seconds of one 3-lane compare turn."""
    chat_id = numi.post("/api/session", {"endpoint_id": endpoint_id, "model": MODELS[0]})["id"]
    ws = _socket(numi, chat_id)
    _enqueue(provider, tokens)
    before = cpu_seconds(numi.proc.pid)
    ws.send(
        json.dumps(
            {
                "type": "send",
                "message": "go",
                "compare": [{"endpoint_id": endpoint_id, "model": model} for model in MODELS],
            }
        )
    )
    _wait_for_turn_end(ws)
    cpu = cpu_seconds(numi.proc.pid) - before
    ws.close()
    return cpu


def separate_run(
    numi: LiveNumi, provider: ScriptedProvider, endpoint_id: int, tokens: int
) -> float:
    """Server CPU seconds of the same three answers as three chats at once."""
    sockets = []
    for model in MODELS:
        chat_id = numi.post("/api/session", {"endpoint_id": endpoint_id, "model": model})["id"]
        sockets.append(_socket(numi, chat_id))
    _enqueue(provider, tokens)
    before = cpu_seconds(numi.proc.pid)
    for ws in sockets:
        ws.send(json.dumps({"type": "send", "message": "go"}))
    for ws in sockets:
        _wait_for_turn_end(ws)
    cpu = cpu_seconds(numi.proc.pid) - before
    for ws in sockets:
        ws.close()
    return cpu


def runs(tokens: int, count: int) -> list[tuple[float, float]]:
    """(compare, separate) server CPU seconds per run, alternating which goes first."""
    out = []
    with ScriptedProvider() as provider:
        with LiveNumi(NUMI_FRAME_INTERVAL_MS=40) as numi:
            endpoint_id = numi.post(
                "/api/endpoints",
                {
                    "name": "bench-compare",
                    "kind": "openai_chat",
                    "base_url": provider.openai_base_url,
                    "api_key": "bench",
                    "default_model": MODELS[0],
                },
            )["id"]
            compare_run(numi, provider, endpoint_id, 50)  # warm up: SDK, connections
            separate_run(numi, provider, endpoint_id, 50)
            for index in range(count):
                if index % 2:
                    separate = separate_run(numi, provider, endpoint_id, tokens)
                    compare = compare_run(numi, provider, endpoint_id, tokens)
                else:
                    compare = compare_run(numi, provider, endpoint_id, tokens)
                    separate = separate_run(numi, provider, endpoint_id, tokens)
                out.append((compare, separate))
    return out


def measure(tokens: int = 10000, count: int = 3) -> list[dict]:
    """The row for bench/run.py."""
    from stats import row

    results = runs(tokens, count)
    total = tokens * len(MODELS)
    per_token = [compare / total * 1e6 for compare, _ in results]
    floors = [separate / total * 1e6 for _, separate in results]
    return [
        row(
            "compare",
            f"3-lane compare, server CPU per token ({len(MODELS)} × {tokens} tokens)",
            per_token,
            "µs/token",
            "≤ 1.1× floor",
            ratio=[compare / separate for compare, separate in results],
            note=f"floor: the same answers as 3 chats at once, "
            f"{statistics.median(floors):.1f} µs/token",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = runs(args.tokens, args.runs)
    total = args.tokens * len(MODELS)
    print(f"3 answers of {args.tokens} tokens each, {args.runs} runs (server CPU per token)\n")
    print("| run | 3-lane compare µs/token | 3 chats µs/token | ratio |")
    print("|---|---|---|---|")
    for index, (compare, separate) in enumerate(results, 1):
        print(
            f"| {index} | {compare / total * 1e6:.1f} | {separate / total * 1e6:.1f} | "
            f"{compare / separate:.2f} |"
        )
    ratio = statistics.median(compare / separate for compare, separate in results)
    print(f"\nmedian ratio: {ratio:.2f}× (target ≤ 1.1×)")


if __name__ == "__main__":
    main()
