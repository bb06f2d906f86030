"""The 200 MB import (issue 42): memory and the hub while a big ChatGPT export imports.

A live `numi serve` (single-user, SQLite, bench/probe.py loaded) is sent a ChatGPT
conversations.json of `--chats` conversations, each a chain of `--messages` messages
(about 200 MB at the defaults: 5,000 × 20), as one streamed request body. While the job
runs, a thread samples every 50 ms the resident memory (VmRSS) of the server and of its
import worker child, and the status poll's answer time. Printed:

- the server's RSS growth: its peak during the import over its RSS just before the upload
  (the issue's target: at most 150 MiB), and the worker's peak RSS;
- the hub's lag during the import, from the probe (a greenlet that asks to wake every
  5 ms): p99 and the longest block, each as the upper bound of the probe's histogram
  bucket it falls in (the issue's target: p99 at most 100 ms);
- the status poll's p99 and longest answer (what the progress page feels), the time to
  import, and what was imported.

The caps of one import (`NUMI_IMPORT_MAX_CHATS`, `NUMI_MAX_REQUEST_BYTES`) are raised to
take the file; the others stay at their defaults.

    python bench/import_memory.py [--chats 5000] [--messages 20] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import probe  # noqa: E402
from live import LiveNumi  # noqa: E402
from stats import percentile  # noqa: E402

SAMPLE_SECONDS = 0.05
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "


def write_export(path: Path, chats: int, messages: int) -> int:
    """A ChatGPT conversations.json written one conversation at a time; its size in bytes.
    Each message's text is about 1.9 KB, so 5,000 chats of 20 messages make about 200 MB."""
    text = (WORDS * 25)[:1900]
    with path.open("w") as out:
        out.write("[")
        for n in range(chats):
            mapping = {"root": {"id": "root", "parent": None, "children": ["m0"], "message": None}}
            parent = "root"
            for i in range(messages):
                node = f"m{i}"
                mapping[node] = {
                    "id": node,
                    "parent": parent,
                    "children": [f"m{i + 1}"] if i + 1 < messages else [],
                    "message": {
                        "id": node,
                        "author": {"role": "user" if i % 2 == 0 else "assistant"},
                        "content": {"content_type": "text", "parts": [f"{n}.{i} {text}"]},
                        "create_time": 1_700_000_000 + n * 100 + i,
                        "metadata": {"model_slug": "gpt-4o"} if i % 2 else {},
                    },
                }
                parent = node
            conversation = {
                "title": f"Conversation {n}",
                "create_time": 1_700_000_000 + n * 100,
                "conversation_id": f"bench-{n}",
                "mapping": mapping,
                "current_node": parent,
            }
            out.write(("," if n else "") + json.dumps(conversation))
        out.write("]")
    return path.stat().st_size


def rss_of(pid: int) -> int:
    """Resident memory of a process in bytes (0 once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def workers_of(pid: int) -> list[int]:
    """The server's import worker children."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"numi.web.import_worker" in command:
                found.append(int(child))
    return found


class Sampler(threading.Thread):
    """RSS of the server and its worker, and the status poll's answer time, until stopped."""

    def __init__(self, numi: LiveNumi, job_id: int):
        super().__init__(daemon=True)
        self.numi, self.job_id = numi, job_id
        self.server_peak = self.worker_peak = 0
        self.polls: list[float] = []
        self.state: dict = {}
        self.done = threading.Event()

    def run(self) -> None:
        pid = self.numi.proc.pid
        url = f"{self.numi.url}/api/imports/{self.job_id}"
        while not self.done.is_set():
            self.server_peak = max(self.server_peak, rss_of(pid))
            for worker in workers_of(pid):
                self.worker_peak = max(self.worker_peak, rss_of(worker))
            asked = time.perf_counter()
            request = urllib.request.Request(url, headers=self.numi.headers)
            with urllib.request.urlopen(request, timeout=120) as response:
                self.state = json.loads(response.read())["job"]
            self.polls.append(time.perf_counter() - asked)
            if self.state["state"] != "running":
                self.done.set()
            time.sleep(SAMPLE_SECONDS)


def lag_bound(before: dict, after: dict, share: float) -> float:
    """The hub lag that `share` of the samples between two probe readings stay within, as
    the upper bound of the histogram bucket it falls in (ms): 0.99 for the p99, 1 for the
    longest (the probe's own maximum counts from the server's start, not the window)."""
    counts = [b - a for a, b in zip(before["lag_hist"], after["lag_hist"], strict=True)]
    total, seen = sum(counts), 0
    for bound, count in zip(probe.BUCKETS, counts, strict=True):
        seen += count
        if seen >= share * total:
            return bound
    return float("inf")


def one_run(export: Path, size: int, chats: int, messages: int) -> dict:
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    env = {
        "NUMI_PLUGINS": "probe",
        "PYTHONPATH": path,
        "NUMI_IMPORT_MAX_CHATS": str(chats + 1),
        "NUMI_IMPORT_MAX_MESSAGES": str(max(chats * messages + 1, 200_000)),
        "NUMI_MAX_REQUEST_BYTES": str(size + 1024 * 1024),
    }
    with LiveNumi(**env) as numi:
        # Warm: the pages and the import's code paths loaded before the baseline.
        numi.post("/api/session", {})
        time.sleep(1)
        baseline = rss_of(numi.proc.pid)
        before = probe.read(numi.data_dir)
        started = time.perf_counter()
        with export.open("rb") as body:
            request = urllib.request.Request(
                f"{numi.url}/api/import",
                data=body,
                method="POST",
                headers={
                    **numi.headers,
                    "Content-Type": "application/json",
                    "Content-Length": str(size),
                },
            )
            with urllib.request.urlopen(request, timeout=600) as response:
                job_id = json.loads(response.read())["job"]["id"]
        uploaded = time.perf_counter() - started
        sampler = Sampler(numi, job_id)
        sampler.start()
        sampler.done.wait(3600)
        seconds = time.perf_counter() - started
        time.sleep(probe.INTERVAL * 200)  # the probe's next write covers the end
        after = probe.read(numi.data_dir)
        job = sampler.state
        return {
            "state": job["state"] if job["state"] == "done" else job["error"]["code"],
            "imported": len(job["result"]["chats"]) if job["state"] == "done" else 0,
            "seconds": seconds,
            "uploaded": uploaded,
            "baseline_mib": baseline / 2**20,
            "growth_mib": (max(sampler.server_peak, baseline) - baseline) / 2**20,
            "worker_mib": sampler.worker_peak / 2**20,
            "lag_p99_ms": lag_bound(before, after, 0.99),
            "lag_max_ms": lag_bound(before, after, 1.0),
            "lag_samples": sum(after["lag_hist"]) - sum(before["lag_hist"]),
            # Time the server was ready to run but the machine gave it no CPU (other
            # processes' share of the lag), and the machine's load at the end.
            "run_queue_s": after["run_queue_wait"] - before["run_queue_wait"],
            "cpu_s": after["cpu"] - before["cpu"],
            "load": os.getloadavg()[0],
            "poll_p99_ms": percentile(sampler.polls, 99) * 1000,
            "poll_max_ms": max(sampler.polls) * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=5000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="numi-bench-import-") as scratch:
        export = Path(scratch) / "conversations.json"
        size = write_export(export, args.chats, args.messages)
        print(
            f"ChatGPT export: {size / 2**20:.0f} MiB, {args.chats:,} chats × "
            f"{args.messages} messages"
        )
        runs = []
        for n in range(args.runs):
            result = one_run(export, size, args.chats, args.messages)
            runs.append(result)
            print(
                f"run {n + 1}: {result['state']}, {result['imported']:,} chats in "
                f"{result['seconds']:.0f} s (upload {result['uploaded']:.1f} s); server RSS "
                f"{result['baseline_mib']:.0f} MiB + {result['growth_mib']:.0f} MiB at most; "
                f"worker RSS {result['worker_mib']:.0f} MiB at most; hub lag p99 ≤ "
                f"{result['lag_p99_ms']:g} ms, longest ≤ {result['lag_max_ms']:g} ms "
                f"({result['lag_samples']:,} samples); status "
                f"poll p99 {result['poll_p99_ms']:.0f} ms, longest {result['poll_max_ms']:.0f} ms; "
                f"server CPU {result['cpu_s']:.0f} s, waiting for a CPU {result['run_queue_s']:.0f} s; "
                f"load {result['load']:.1f}",
                flush=True,
            )
        if len(runs) > 1:
            for key in ("growth_mib", "worker_mib", "lag_p99_ms", "lag_max_ms", "seconds"):
                print(f"median {key}: {statistics.median(r[key] for r in runs):.1f}")


if __name__ == "__main__":
    main()
