"""The /v1 gateway's cost over calling the same scripted server directly: added latency
to the first token of a streamed Chat Completions request, relay throughput of one long
stream, and many concurrent streaming clients (the direct calls of the same streams are
the floor, measured in the same run).

    python bench/gateway.py [--runs 30] [--tokens 10000] [--clients 200]

The concurrent row: CLIENTS clients at once, each streaming one answer of CLIENT_TOKENS
equal-width tokens paced at CLIENT_RATE a second. The scripted provider stamps each token
when it writes it; each client notes when it first sees each token. A token's latency is
the difference (both are time.perf_counter(), here in one process); the row is its p95
through /v1, with the p95 of the same clients calling the scripted server directly as the
floor, and every token that never arrived counted as lost. The clients are threads of
this process, as the provider's are: their scheduling weighs on both runs alike.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import LiveNumi  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402


def post_chat(connection: http.client.HTTPConnection, path: str, key: str, body: str) -> None:
    """A Chat Completions request under the base URL's `path`, with the API key."""
    connection.request(
        "POST",
        path + "/chat/completions",
        body=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )


def stream_chat(base_url: str, key: str, model: str) -> tuple[float, float, int]:
    """(seconds to the first content, seconds to the end, characters of content) of one
    streamed Chat Completions request, read and parsed line by line as a client does."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    body = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    )
    started = time.perf_counter()
    post_chat(connection, parts.path, key, body)
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


CLIENT_TOKENS = 50
CLIENT_RATE = 20.0
TOKEN = re.compile(r"t(\d{4}) ")


def paced(tokens: int = CLIENT_TOKENS, rate: float = CLIENT_RATE) -> Scenario:
    # Equal-width tokens "t0000 ": one chunk each, so each is stamped when written.
    return (
        Scenario()
        .text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens)
        .tokens_per_second(rate)
    )


def stream_tokens(
    base_url: str, key: str, model: str, question: str, go: threading.Event
) -> dict[int, float]:
    """Connect, wait for `go`, stream one answer to `question`: when each token was first
    seen (time.perf_counter()), by its number."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    connection.connect()
    body = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": question}]}
    )
    go.wait()
    post_chat(connection, parts.path, key, body)
    response = connection.getresponse()
    seen: dict[int, float] = {}
    if response.status != 200:
        response.read()
        connection.close()
        return seen
    for line in response:
        if not line.startswith(b"data: {"):
            continue
        at = time.perf_counter()
        choices = json.loads(line[6:])["choices"]
        text = choices[0]["delta"].get("content") if choices else None
        for found in TOKEN.finditer(text or ""):
            seen.setdefault(int(found.group(1)), at)
    connection.close()
    return seen


def concurrent(
    provider: ScriptedProvider, base_url: str, key: str, model: str, clients: int
) -> tuple[list[float], int]:
    """`clients` streams at once: every token's latency (ms) from the provider's write to
    the client's read, and how many tokens never arrived."""
    provider.enqueue(*(paced() for _ in range(clients)))
    before = len(provider.requests)
    go = threading.Event()
    seen: dict[int, dict[int, float]] = {}

    def client(index: int) -> None:
        try:
            seen[index] = stream_tokens(base_url, key, model, f"Client {index}", go)
        except OSError:
            seen[index] = {}  # a refused or broken connection: its tokens are lost

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join()
    requests = {r.body["messages"][-1]["content"]: r for r in provider.requests[before:]}
    latencies, lost = [], 0
    for index, by_token in seen.items():
        lost += CLIENT_TOKENS - len(by_token)
        request = requests.get(f"Client {index}")
        if request is None:
            continue
        stamps = request.delta_times
        latencies += [(at - stamps[n]) * 1000 for n, at in by_token.items() if n < len(stamps)]
    return latencies, lost


def measure(runs: int = 30, tokens: int = 10000, clients: int = 200) -> list[dict]:
    """Rows for bench/run.py."""
    from stats import percentile, row

    out = []
    # No per-key minute limit: one key stands in for many clients.
    with ScriptedProvider() as provider, LiveNumi(NUMI_API_RATE_PER_MINUTE="0") as numi:
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
        added, via_p95, floor_p95, lost, floor_lost = [], [], [], 0, 0
        for _ in range(3):
            floor, missed = concurrent(
                provider, provider.openai_base_url, "bench", "scripted-model", clients
            )
            floor_lost += missed
            via, missed = concurrent(provider, gateway, key, via_model, clients)
            lost += missed
            via_p95.append(percentile(via, 95))
            floor_p95.append(percentile(floor, 95))
            added.append(via_p95[-1] - floor_p95[-1])
        out.append(
            row(
                "gateway concurrent clients",
                f"p95 added latency, {clients} streaming clients at once through "
                "/v1/chat/completions",
                added,
                "ms",
                "0 lost, p95 added ≤ 100 ms",
                note=f"{lost} of {3 * clients * CLIENT_TOKENS} tokens lost ({floor_lost} "
                f"direct); token p95 {statistics.median(via_p95):.1f} ms via /v1, "
                f"{statistics.median(floor_p95):.1f} ms direct",
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
    parser.add_argument("--clients", type=int, default=200)
    args = parser.parse_args()
    from stats import table

    print(table(measure(args.runs, args.tokens, args.clients)))


if __name__ == "__main__":
    main()
