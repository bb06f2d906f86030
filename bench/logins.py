"""Login load: does a flood of bad logins slow another user's running stream?

Multi-user Numi on loopback with the scripted provider. Alice streams an answer at 20
tokens/s over the JSON WebSocket; meanwhile 20 clients (threads of another process, so that
their work does not run in this one) post wrong passwords for bob as fast as they are
answered. The figure is the p95 of alice's token latency (provider write → receipt) with
the load minus the same without it, in the same run; three runs, the median.

The login limits are set out of reach (NUMI_LOGIN_FREE_ATTEMPTS=1000000), so every attempt
computes a full argon2id hash: the worst case, as from thousands of addresses. With the
default limits most of these attempts would be refused at once with 429.

    python bench/logins.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from live import LiveNumi  # noqa: E402
from numi.testing import ScriptedProvider  # noqa: E402
from stats import percentile, row  # noqa: E402
from turns import paced, token_latencies  # noqa: E402

TOKENS = 120  # 6 s at 20 tokens/s
LOGIN_CLIENTS = 20

LOGIN_WORKER = """
import sys, threading, time, urllib.error, urllib.parse, urllib.request

url, origin, clients = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = urllib.parse.urlencode({"username": "bob", "password": "not bob's password"}).encode()
stop = threading.Event()
times, statuses = [], []


def flood():
    while not stop.is_set():
        request = urllib.request.Request(url + "/login", data=body, headers={"Origin": origin})
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        times.append(time.perf_counter() - started)
        statuses.append(status)


threads = [threading.Thread(target=flood) for _ in range(clients)]
for thread in threads:
    thread.start()
print("started", flush=True)
sys.stdin.readline()  # stop
stop.set()
for thread in threads:
    thread.join()
times.sort()
print(len(times), times[len(times) // 2] * 1000, sum(s == 401 for s in statuses), flush=True)
"""


class Alice:
    """Alice's API token and her chat on the scripted provider."""

    def __init__(self, numi: LiveNumi, provider: ScriptedProvider):
        self.numi = numi
        # Alice is an admin: only admins may point an endpoint at a loopback server.
        self.token = numi.add_user("alice", "a long password", admin=True)
        numi.add_user("bob", "a long password")
        self.headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        endpoint = self.post(
            "/api/endpoints",
            {
                "name": "bench",
                "kind": "openai_chat",
                "api_key": "bench",
                "base_url": provider.openai_base_url,
                "default_model": "bench-model",
            },
        )
        self.endpoint_id = endpoint["id"]

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.numi.url + path, data=json.dumps(body).encode(), headers=self.headers
        )
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    def stream(self, provider: ScriptedProvider) -> list[float]:
        """One paced answer in a new chat: the per-token latencies (ms)."""
        from numi.testing.websocket_client import WebSocketClient as Client

        chat_id = self.post(
            "/api/session", {"endpoint_id": self.endpoint_id, "model": "bench-model"}
        )["id"]
        ws = Client.connect(
            f"ws://127.0.0.1:{self.numi.port}/ws/{chat_id}?format=json",
            headers={"Origin": self.numi.url, "Authorization": f"Bearer {self.token}"},
        )
        provider.enqueue(paced(TOKENS, 20))
        before = len(provider.requests)
        ws.send(json.dumps({"type": "send", "message": "Slowly, please"}))
        events = []
        while True:
            raw = ws.receive(timeout=60)
            if raw is None:
                raise TimeoutError("no turn_end")
            events.append((time.perf_counter(), json.loads(raw)))
            if events[-1][1]["type"] == "turn_end":
                break
        ws.close()
        latencies, seen = token_latencies(events, provider.requests[before])
        assert seen == TOKENS, f"{seen} of {TOKENS} tokens"
        return latencies


def one_run(numi: LiveNumi, alice: Alice, provider: ScriptedProvider) -> dict:
    quiet = alice.stream(provider)
    flood = subprocess.Popen(
        [sys.executable, "-c", LOGIN_WORKER, numi.url, numi.url, str(LOGIN_CLIENTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert flood.stdout.readline().strip() == "started"
    time.sleep(0.5)  # the flood is under way (hashes queued) before the stream starts
    loaded = alice.stream(provider)
    flood.stdin.write("stop\n")
    flood.stdin.flush()
    count, login_ms, wrong = flood.stdout.readline().split()
    flood.wait(60)
    return {
        "quiet": percentile(quiet, 95),
        "loaded": percentile(loaded, 95),
        "logins": int(count),
        "login_ms": float(login_ms),
        "wrong": int(wrong),
    }


def measure(runs: int = 3) -> list[dict]:
    with ScriptedProvider() as provider:
        with LiveNumi(NUMI_AUTH="multi", NUMI_LOGIN_FREE_ATTEMPTS="1000000") as numi:
            alice = Alice(numi, provider)
            alice.stream(provider)  # the first turn imports the SDK
            results = [one_run(numi, alice, provider) for _ in range(runs)]
    added = [r["loaded"] - r["quiet"] for r in results]
    note = (
        "p95 quiet/loaded per run: "
        + ", ".join(f"{r['quiet']:.0f}/{r['loaded']:.0f}" for r in results)
        + f" ms; {statistics.median(r['logins'] for r in results):.0f} bad logins per run "
        f"(p50 {statistics.median(r['login_ms'] for r in results):.0f} ms each), every one hashed"
    )
    return [
        row(
            "login load",
            f"{LOGIN_CLIENTS} concurrent bad logins: added p95 token latency of another user's stream",
            added,
            "ms",
            "≤ 20 ms",
            note=note,
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for result in measure(args.runs):
        print(
            f"{result['metric']}: median {result['median']:.1f} {result['unit']} "
            f"(min {result['min']:.1f}, max {result['max']:.1f}, {result['runs']} runs; target {result['target']})\n"
            f"{result['note']}"
        )
