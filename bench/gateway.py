"""The /v1 gateway's cost over calling the same scripted server directly: added latency
to the first token of a streamed Chat Completions request, and relay throughput of one
long stream (the direct read of the same stream is the floor, measured in the same run).

    python bench/gateway.py [--runs 30] [--tokens 10000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import LiveNumi  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402


def stream_chat(base_url: str, key: str, model: str) -> tuple[float, float, int]:
    """(seconds to the first content, seconds to the end, characters of content) of one
    streamed Chat Completions request, read and parsed line by line as a client does."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    body = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    )
    started = time.perf_counter()
    connection.request(
        "POST",
        parts.path + "/chat/completions",
        body=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
    first = None
    received = 0
    for line in response:
        if not line.startswith(b"data: {"):
            continue
        choices = json.loads(line[6:])["choices"]
        text = choices[0]["delta"].get("content") if choices else None
        if text:
            received += len(text)
            if first is None:
                first = time.perf_counter() - started
    ended = time.perf_counter() - started
    connection.close()
    return first or ended, ended, received


def measure(runs: int = 30, tokens: int = 10000) -> list[dict]:
    """Rows for bench/run.py."""
    from stats import row

    out = []
    with ScriptedProvider() as provider, LiveNumi() as numi:
        numi.chat_on(provider.openai_base_url)  # the endpoint "bench-openai_chat-…"
        endpoint = next(iter(numi.endpoints.values()))
        name = next(
            e["name"]
            for e in json.loads(_get(numi, "/api/endpoints"))["endpoints"]
            if e["id"] == endpoint
        )
        key = numi.post("/api/keys", {"name": "bench", "keep": False})["secret"]
        gateway = numi.url + "/v1"
        via_model = f"{name}/scripted-model"  # a model the scripted server lists

        def once(base: str, secret: str, model: str, text: str, chunks: int):
            provider.enqueue(Scenario().text(text, chunks=chunks))
            return stream_chat(base, secret, model)

        once(gateway, key, via_model, "warm up", 2)  # SDK import and the adapter's client
        added, direct_first = [], []
        for _ in range(runs):
            direct = once(provider.openai_base_url, "bench", "scripted-model", "Hello.", 1)[0]
            via = once(gateway, key, via_model, "Hello.", 1)[0]
            added.append((via - direct) * 1000)
            direct_first.append(direct * 1000)
        out.append(
            row(
                "gateway first token",
                "added latency to the first token, /v1/chat/completions over a direct call",
                added,
                "ms",
                "median ≤ 5 ms",
                note=f"direct first token {statistics.median(direct_first):.1f} ms",
            )
        )
        ratios, speeds = [], []
        for _ in range(3):
            direct = once(
                provider.openai_base_url, "bench", "scripted-model", "tok " * tokens, tokens
            )
            via = once(gateway, key, via_model, "tok " * tokens, tokens)
            assert via[2] == direct[2] == len("tok " * tokens), (via, direct)  # nothing lost
            ratios.append(via[1] / direct[1])
            speeds.append(tokens / via[1])
        out.append(
            row(
                "gateway relay throughput",
                f"one stream of {tokens} tokens through /v1/chat/completions",
                speeds,
                "tokens/s",
                "≤ 1.15× floor",
                ratio=ratios,
                note="floor: the direct read of the same stream",
            )
        )
    return out


def _get(numi: LiveNumi, path: str) -> str:
    import urllib.request

    request = urllib.request.Request(numi.url + path, headers=numi.headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=10000)
    args = parser.parse_args()
    from stats import table

    print(table(measure(args.runs, args.tokens)))


if __name__ == "__main__":
    main()
