"""Open tabs: 1,000 idle WebSocket clients on one server (the page's socket, resumed on
its chat and then quiet). Measures the server's memory per idle client and whether it stays
responsive: GET / latency while they are connected, against the same server's GET / with
no client connected (the floor, measured just before in the same run).

    python bench/idle.py [--clients 1000] [--chats 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe  # noqa: E402
from load import Clients, probed_numi  # noqa: E402
from memory import rss_mib  # noqa: E402
from stats import percentile, row  # noqa: E402


def page_latencies(numi, count: int = 30) -> list[float]:
    values = []
    for _ in range(count):
        started = time.perf_counter()
        request = urllib.request.Request(numi.url + "/", headers=numi.headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        values.append((time.perf_counter() - started) * 1000)
        time.sleep(0.02)
    return values


def one_run(clients: int, chats: int) -> dict:
    with probed_numi() as numi:
        chat_ids = [numi.post("/api/session", {"title": f"Tab {i}"})["id"] for i in range(chats)]
        page_latencies(numi, 5)  # warm templates
        time.sleep(1)
        rss_before = rss_mib(numi.proc.pid)
        quiet = page_latencies(numi)
        tabs = Clients(
            "idle", numi.port, numi.url, [f"/ws/{chat_ids[i % chats]}" for i in range(clients)], 0
        )
        time.sleep(2)  # let the server settle after the connection burst
        rss_after = rss_mib(numi.proc.pid)
        inside0 = probe.read(numi.data_dir)
        time.sleep(2)  # nothing but the open sockets
        inside1 = probe.read(numi.data_dir)
        busy = page_latencies(numi)
        tabs.go()
        tabs.results()
    inside = probe.window(inside0, inside1)
    return {
        "kib_per_client": (rss_after - rss_before) * 1024 / clients,
        "quiet_p50": statistics.median(quiet),
        "busy_p50": statistics.median(busy),
        "busy_p95": percentile(busy, 95),
        "ratio": statistics.median(busy) / statistics.median(quiet),
        "idle_cpu": inside["cpu_share"],
    }


def measure(clients: int = 1000, chats: int = 100, runs: int = 3) -> list[dict]:
    results = [one_run(clients, chats) for _ in range(runs)]
    return [
        row(
            "idle tabs",
            f"{clients:,} idle WebSocket clients: server memory per client",
            [r["kib_per_client"] for r in results],
            "KiB",
            "≤ 100 KiB",
        ),
        row(
            "idle tabs",
            f"GET / with {clients:,} idle clients connected, p50",
            [r["busy_p50"] for r in results],
            "ms",
            "≤ 1.5× floor",
            ratio=[r["ratio"] for r in results],
            note=f"floor: GET / with none connected, p50 {statistics.median(r['quiet_p50'] for r in results):.1f} ms; "
            f"p95 {statistics.median(r['busy_p95'] for r in results):.1f} ms; server CPU with the "
            "tabs open and nothing else "
            f"{statistics.median(r['idle_cpu'] for r in results) * 100:.1f} % of a core",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for r in measure(args.clients, args.chats, args.runs):
        print(r)


if __name__ == "__main__":
    main()
