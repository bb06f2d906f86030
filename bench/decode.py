"""Per-token CPU of the provider decode path, layer by layer, against its floor.

One OpenAI Chat Completions stream of TOKENS one-token chunks from the scripted provider
(in a child process, so only the reader's CPU is counted), read five ways in this process,
each timed with time.thread_time() (CPU of the reading thread only):

- floor: the raw socket, recv() until the body ends (what any relay must do);
- httpx: the same request through httpx2, iter_raw() (HTTP framing, chunked decoding);
- openai response: the SDK's with_streaming_response and its iter_bytes();
- + SSE/JSON: numi.providers.sse over that (what the adapter reads);
- adapter: numi's OpenAIChatAdapter.stream(), neutral TextDelta events (everything a turn
  gets per token from the provider), on Numi's transport (numi.providers.transport: the
  body read in large recv()s and unframed in one pass);
- adapter, stock transport: the same adapter on the SDK's own httpx2 client (h11 parsing
  one chunk per event), the path before issue 27.

With --paced SECONDS the server waits that long before each chunk, so that every read gets
about one token, as it does from a real model (a token arrives every 10-50 ms): the floor
then pays a recv() per token, as every layer above it must. Unpaced, the stream arrives in
bulk and the floor reads 64 KiB at a time: that floor counts bytes, not tokens.

    python bench/decode.py [--tokens 20000] [--runs 3] [--paced 0.0005]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import free_port  # noqa: E402

BODY = {"model": "bench-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}

SERVE = """
import sys, time
from numi.testing import Scenario, ScriptedProvider
tokens = int(sys.argv[2])
scenario = Scenario().text("tok " * tokens, chunks=tokens).delay(float(sys.argv[3]))
with ScriptedProvider(port=int(sys.argv[1]), default_scenario=lambda r: scenario) as p:
    print("ready", flush=True)
    sys.stdin.readline()
"""


def raw_socket(port: int) -> int:
    payload = json.dumps(BODY).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: "
        + str(len(payload)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + payload
    )
    size = 0
    while True:
        data = sock.recv(65536)
        if not data:
            break
        size += len(data)
    sock.close()
    return size


def httpx_raw(port: int) -> int:
    import httpx2

    with (
        httpx2.Client() as client,
        client.stream(
            "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY
        ) as response,
    ):
        return sum(len(chunk) for chunk in response.iter_raw())


def _openai(port: int):
    from openai import OpenAI

    return OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench", max_retries=0)


def openai_bytes(client) -> int:
    with client.chat.completions.with_streaming_response.create(
        model="bench-model", stream=True, messages=BODY["messages"]
    ) as response:
        return sum(len(chunk) for chunk in response.iter_bytes())


def openai_sse(client) -> int:
    from numi.providers.sse import SSEStream

    stream = SSEStream.open(
        client.chat.completions.with_streaming_response.create(
            model="bench-model", stream=True, messages=BODY["messages"]
        )
    )
    try:
        return sum(1 for _ in stream)
    finally:
        stream.close()


def adapter_events(adapter) -> int:
    from numi.providers import ChatRequest
    from numi.providers.events import TextDelta

    request = ChatRequest(model="bench-model", messages=[{"role": "user", "content": "go"}])
    return sum(1 for event in adapter.stream(request) if isinstance(event, TextDelta))


def measure(tokens: int = 20000, runs: int = 3, paced: float = 0.0) -> list[dict]:
    from numi.providers import get_adapter
    from stats import row

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port), str(tokens), str(paced)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout.readline().strip() == "ready"
        client = _openai(port)
        adapter = get_adapter("openai_chat", f"http://127.0.0.1:{port}/v1", "bench")
        adapter.client  # build it (and import the SDK) before timing
        stock = get_adapter("openai_chat", f"http://127.0.0.1:{port}/v1", "bench")
        stock._client = client  # the SDK's own httpx2 client, without Numi's transport
        layers = {
            "floor: raw socket recv": lambda: raw_socket(port),
            "httpx iter_raw": lambda: httpx_raw(port),
            "openai SDK iter_bytes": lambda: openai_bytes(client),
            "+ SSE framing and JSON": lambda: openai_sse(client),
            "adapter: neutral events": lambda: adapter_events(adapter),
            "adapter, stock httpx2 transport": lambda: adapter_events(stock),
        }
        results: dict[str, list[float]] = {name: [] for name in layers}
        for _ in range(runs):
            for name, read in layers.items():  # interleaved: drift hits every layer alike
                started = time.thread_time()
                read()
                results[name].append((time.thread_time() - started) / tokens * 1e6)
    finally:
        server.stdin.write("stop\n")
        server.stdin.flush()
        server.wait(10)
    floor = results["floor: raw socket recv"]
    pace = f", paced {paced * 1000:g} ms" if paced else ""
    return [
        row(
            "decode",
            f"provider stream, {tokens:,} one-token chunks{pace}: {name}",
            values,
            "µs CPU/token",
            "≤ 3× floor" if name.startswith("adapter:") else "",
            ratio=[v / f for v, f in zip(values, floor)] if not name.startswith("floor") else None,
        )
        for name, values in results.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--paced", type=float, default=0.0, help="seconds before each chunk")
    args = parser.parse_args()
    from stats import table

    print(table(measure(args.tokens, args.runs, args.paced)))


if __name__ == "__main__":
    main()
