"""Streaming load: many concurrent turns at a steady token rate, measured from outside
(lost tokens, added latency, server CPU) and from inside (bench/probe.py: hub lag, time in
the database, run-queue wait), with the per-event CPU cost set against its floor, a bare
gevent WebSocket echo of the same frames (bench/echo.py) driven the same way in the same
run.

    python bench/load.py [--turns 500] [--tokens 100] [--view json|html] [--runs 1]
    python bench/load.py --echo --turns 100      # the floor alone

Clients are greenlets in two separate processes (bench/loadclient.py), so their own
scheduling does not stand in for the server's latency; the scripted provider runs here,
one thread per stream, and stamps each token when it writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import probe  # noqa: E402
from live import ACCESS_TOKEN, LiveNumi, free_port  # noqa: E402
from memory import rss_mib  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402
from stats import percentile  # noqa: E402

RATE = 20.0
CLIENT_PROCESSES = 2


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, share: float = 0.1, window: float = 1.0, deadline: float = 60.0) -> None:
    """Wait until the process spends under `share` of a core over a `window` (its turns'
    saves and after-hooks done, its sockets closed), or `deadline` seconds pass."""
    stop = time.perf_counter() + deadline
    while time.perf_counter() < stop:
        used = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - used < share * window:
            return


def settled_rss(pid: int, still: float = 3.0, deadline: float = 20.0) -> float:
    """RSS once it has stopped falling for `still` seconds: a server gives memory back a
    moment after its last turn's after-work (numi/heap.py), which `settle` may precede."""
    stop = time.perf_counter() + deadline
    low, low_at = rss_mib(pid), time.perf_counter()
    while time.perf_counter() < stop and time.perf_counter() - low_at < still:
        time.sleep(0.25)
        now = rss_mib(pid)
        if now < low - 0.5:
            low, low_at = now, time.perf_counter()
    return rss_mib(pid)


def paced(tokens: int, rate: float = RATE) -> Scenario:
    # Equal-width tokens "t0000 ": one chunk each, so each is stamped when written.
    return (
        Scenario()
        .text("".join(f"t{i:04d} " for i in range(tokens)), chunks=tokens)
        .tokens_per_second(rate)
    )


def probed_numi(**env) -> LiveNumi:
    """A LiveNumi with bench/probe.py loaded as a plugin.

    Every chat of a run belongs to the one benchmark user, who stands in for as many users:
    the per-user WebSocket message limit (200/s, burst 400, one process) would close
    sockets of 500 chats that resume and send at once, so it is raised here."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    env = {"NUMI_WS_USER_MESSAGES_PER_SECOND": "100000", "NUMI_PLUGINS": "probe", **env}
    return LiveNumi(PYTHONPATH=path, **env)


class Clients:
    """The client processes, connected and waiting for "go".

    `servers` spreads the chats over several processes of one cluster, [(port, origin)]:
    client process p talks to server p mod len(servers). Every wait has a deadline, so a
    server that stops answering under load fails the run instead of hanging it."""

    def __init__(
        self,
        mode: str,
        port: int,
        origin: str,
        paths: list[str],
        tokens: int,
        servers: list[tuple[int, str]] | None = None,
        processes: int = CLIENT_PROCESSES,
        connect_timeout: float = 120,
    ):
        servers = servers or [(port, origin)]
        self.tokens = tokens
        self.errors: dict[str, int] = {}  # the turns' `error` events by code (JSON mode)
        self.unended = 0  # turns with no `turn_end` when the clients stopped waiting
        self.procs = []
        self.lines: list[queue.Queue] = []
        try:
            for p in range(processes):
                port, origin = servers[p % len(servers)]
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        str(HERE / "loadclient.py"),
                        mode,
                        str(port),
                        origin,
                        str(tokens),
                        str(RATE),
                        ACCESS_TOKEN,
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "BENCH_CLIENT_SECONDS": str(tokens / RATE + 30)},
                )
                self.procs.append(proc)
                lines: queue.Queue = queue.Queue()
                threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
                self.lines.append(lines)
                proc.stdin.write(
                    json.dumps([[i, paths[i]] for i in range(p, len(paths), processes)]) + "\n"
                )
                proc.stdin.flush()
            deadline = time.monotonic() + connect_timeout
            for lines in self.lines:
                if _line(lines, deadline).strip() != "ready":
                    raise RuntimeError("a load client failed to connect")
        except BaseException:
            self.kill()
            raise

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def go(self) -> float:
        for proc in self.procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return time.perf_counter()

    def results(
        self, timeout: float | None = None
    ) -> tuple[dict[int, dict[int, float]], dict[int, dict[int, float]]]:
        """Every client's readings; by default allow the turn's length plus a minute."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.tokens / RATE + 60)
        seen, sent = {}, {}
        try:
            for proc, lines in zip(self.procs, self.lines):
                out = json.loads(_line(lines, deadline))
                proc.wait(max(1.0, deadline - time.monotonic()))
                seen.update({int(i): dict(pairs) for i, pairs in out["seen"].items()})
                sent.update({int(i): dict(pairs) for i, pairs in out["sent"].items()})
                for code, count in out.get("errors", {}).items():
                    self.errors[code] = self.errors.get(code, 0) + count
                self.unended += out.get("unended", 0)
        except BaseException:
            self.kill()
            raise
        return seen, sent

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put("")  # end of output: the client exited


def _line(lines: queue.Queue, deadline: float) -> str:
    try:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise TimeoutError("a load client gave no answer in time") from None
    if not line:
        raise RuntimeError("a load client exited without an answer")
    return line


def _steady_window(started: float, tokens: int) -> tuple[float, float]:
    """The middle of the streams: after every turn has started, before any ends."""
    duration = tokens / RATE
    return started + min(2.0, duration / 3), started + duration - min(1.0, duration / 6)


def _events_in(seen: dict[int, dict[int, float]], begin: float, end: float) -> int:
    return sum(1 for by_token in seen.values() for at in by_token.values() if begin <= at < end)


# The steady window's per-event CPU is left out (NaN) when the window saw fewer than this
# share of the events it would hold on time: a server that falls behind delivers most of
# its events after the window, and a few events over the window's CPU gave 2e6 µs.
STEADY_MIN_SHARE = 0.25


def _per_event(
    cpu_in_window: float, in_window: int, sockets: int, begin: float, end: float
) -> dict:
    """The steady window's CPU per event, and how many events it held of those due."""
    due = sockets * (end - begin) * RATE
    enough = in_window >= STEADY_MIN_SHARE * due
    return {
        "event_cpu_us": cpu_in_window / in_window * 1e6 if enough else float("nan"),
        "steady_events": in_window,
        "steady_events_due": round(due),
        **({} if enough else {"steady_note": "too few events in the steady window"}),
    }


def spy(pid: int, seconds: float, output: str) -> subprocess.Popen:
    """py-spy sampling the server (collapsed stacks, for a flame graph or a per-layer sum)."""
    py_spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [
            str(py_spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, int(seconds))),
            "--rate",
            "250",
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            output,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def numi_run(
    turns: int,
    tokens: int,
    view: str,
    profile: str | None = None,
    cprofile: str | None = None,
    **env,
) -> dict:
    """One run: `turns` chats each answering `tokens` tokens at 20/s, all at once.
    `cprofile`: a cProfile of the server over the whole run (bench/cprofiler.py), where
    py-spy is not installed."""
    if cprofile:
        env = {**env, "NUMI_BENCH_CPROFILE": str(Path(cprofile).resolve())}
        env["NUMI_PLUGINS"] = "probe,cprofiler"
    with ScriptedProvider() as provider, probed_numi(**env) as numi:
        warm = numi.chat_on(provider.openai_base_url)
        provider.enqueue(Scenario().text("warm"))
        # A first turn in the run's view imports what a server's first answer does (the
        # SDK, and for the HTML view the Markdown parser), before anything is measured.
        warmup = Clients(view, numi.port, numi.url, [f"/ws/{warm}"], 1)
        warmup.go()
        warmup.results()
        chats = [numi.chat_on(provider.openai_base_url) for _ in range(turns)]
        for _ in range(turns):
            provider.enqueue(paced(tokens))
        clients = Clients(view, numi.port, numi.url, [f"/ws/{c}" for c in chats], tokens)
        time.sleep(0.5)
        rss_before = rss_mib(numi.proc.pid)
        before = len(provider.requests)
        cpu0 = cpu_seconds(numi.proc.pid)
        if cprofile:
            os.kill(numi.proc.pid, signal.SIGUSR1)
        started = clients.go()
        begin, end = _steady_window(started, tokens)
        time.sleep(max(0.0, begin - time.perf_counter()))
        inside0 = probe.read(numi.data_dir)
        profiler = spy(numi.proc.pid, end - begin, profile) if profile else None
        time.sleep(max(0.0, end - time.perf_counter()))
        inside1 = probe.read(numi.data_dir)
        rss_peak = rss_mib(numi.proc.pid)
        seen, _ = clients.results()
        if profiler is not None:
            profiler.wait(30)
        wall = time.perf_counter() - started
        cpu = cpu_seconds(numi.proc.pid) - cpu0
        # What the process still holds once every turn has ended and its sockets closed:
        # the "RSS after 500 streams" (memory a finished turn should give back).
        settle(numi.proc.pid)
        if cprofile:
            os.kill(numi.proc.pid, signal.SIGUSR2)
        cpu_settled = cpu_seconds(numi.proc.pid) - cpu0  # the turns' saves and ends too
        rss_after = settled_rss(numi.proc.pid)
        requests = {r.body["messages"][-1]["content"]: r for r in provider.requests[before:]}
    inside = probe.window(inside0, inside1)
    latencies, lost, unstarted = [], 0, 0
    for index, by_token in seen.items():
        request = requests.get(f"Turn {index}")
        lost += tokens - len(by_token)
        if request is None:  # the turn never called the provider: all its tokens are lost
            unstarted += 1
            continue
        stamps = request.delta_times
        latencies += [(at - stamps[n]) * 1000 for n, at in by_token.items() if n < len(stamps)]
    in_window = _events_in(seen, inside0["clock"], inside1["clock"])
    cpu_in_window = inside1["cpu"] - inside0["cpu"]
    delivered = sum(len(by_token) for by_token in seen.values())
    return {
        "lost": lost,
        "unstarted": unstarted,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "cpu_share": cpu / wall,
        "wall": wall,
        "ideal": tokens / RATE,
        # Whole run: every event delivered over the server's CPU from the first turn's
        # start until it settled (turn starts and saves included), whatever the lag.
        "run_event_cpu_us": cpu_settled / delivered * 1e6 if delivered else float("nan"),
        "delivered": delivered,
        # What the turns' error events said (code: count): why tokens were lost.
        "errors": ",".join(f"{code}:{n}" for code, n in sorted(clients.errors.items())) or "-",
        **_per_event(cpu_in_window, in_window, turns, inside0["clock"], inside1["clock"]),
        "cpu_total": cpu,
        "rss_per_turn_kib": (rss_peak - rss_before) / turns * 1024,
        "rss_before": rss_before,
        "rss_after": rss_after,
        **{f"steady_{k}": v for k, v in inside.items()},
    }


def echo_run(clients_count: int, tokens: int) -> dict:
    """The floor: the same number of sockets, each echoing `tokens` frames at 20/s."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "echo.py"), str(port)], stderr=subprocess.DEVNULL
    )
    try:
        import urllib.request

        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        clients = Clients("echo", port, f"http://127.0.0.1:{port}", ["/"] * clients_count, tokens)
        time.sleep(0.5)
        cpu_start = cpu_seconds(server.pid)
        started = clients.go()
        begin, end = _steady_window(started, tokens)
        time.sleep(max(0.0, begin - time.perf_counter()))
        cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
        time.sleep(max(0.0, end - time.perf_counter()))
        cpu1, t1 = cpu_seconds(server.pid), time.perf_counter()
        seen, sent = clients.results()
        cpu_total = cpu_seconds(server.pid) - cpu_start
    finally:
        server.terminate()
        server.wait(10)
    latencies = [
        (at - sent[i][n]) * 1000 for i, by_token in seen.items() for n, at in by_token.items()
    ]
    delivered = sum(len(v) for v in seen.values())
    return {
        "lost": sum(tokens - len(v) for v in seen.values()),
        "p95": percentile(latencies, 95),
        "run_event_cpu_us": cpu_total / delivered * 1e6 if delivered else float("nan"),
        "delivered": delivered,
        **_per_event(cpu1 - cpu0, _events_in(seen, t0, t1), clients_count, t0, t1),
        "cpu_share": (cpu1 - cpu0) / (t1 - t0),
        "cpu_total": cpu_total,
    }


def describe(result: dict) -> str:
    return ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()
    )


def per_event(runs: int = 3, turns: int = 100, short: int = 40, long: int = 120) -> list[dict]:
    """Per-event CPU under the 100-turn load, next to its floor, as a marginal cost: the
    server's CPU for turns of `long` tokens minus that for turns of `short` tokens, over
    the extra tokens. A turn's fixed costs (its start and end) cancel out, however the
    busy machine spreads them in time."""
    from stats import row

    ratios, costs, floors = [], [], []
    extra = turns * (long - short)
    for _ in range(runs):
        floor = (
            (echo_run(turns, long)["cpu_total"] - echo_run(turns, short)["cpu_total"]) / extra * 1e6
        )
        cost = (
            (
                numi_run(turns, long, "json")["cpu_total"]
                - numi_run(turns, short, "json")["cpu_total"]
            )
            / extra
            * 1e6
        )
        floors.append(floor)
        costs.append(cost)
        ratios.append(cost / floor)
    return [
        row(
            "per-event CPU",
            f"{turns} turns at 20 tokens/s, JSON view: server CPU per extra token",
            costs,
            "µs",
            ratio=ratios,
            note=f"floor (gevent WebSocket echo of the same frames) {statistics.median(floors):.0f} µs; "
            f"ratio per run {', '.join(f'{r:.2f}' for r in ratios)}; turns of {long} vs {short} tokens",
        )
    ]


def _each(results: list[dict], key: str) -> str:
    return ", ".join(f"{r[key]:.0f}" for r in results)


def capacity(
    runs: int = 3, turns: int = 500, tokens: int = 100, views: tuple[str, ...] = ("json", "html")
) -> list[dict]:
    """`turns` concurrent turns in each view, each run beside its floor: the bare gevent
    echo of as many sockets and frames, run just before, so that a reader on another
    machine compares the ratio; and the server's RSS once the turns have ended."""
    from stats import row

    rows = []
    for view in views:
        results, floors = [], []
        for _ in range(runs):
            floors.append(echo_run(turns, tokens))
            results.append(numi_run(turns, tokens, view))
        label = f"{turns} turns at 20 tokens/s, {view.upper()} view"
        note = (
            f"hub lag p99 ≤ {statistics.median(r['steady_lag_p99_ms_at_most'] for r in results):.0f} ms; "
            f"SQLite {statistics.median(r['steady_db_share'] for r in results) * 100:.1f} % of wall time; "
            f"run-queue wait {statistics.median(r['steady_run_queue_wait_share'] for r in results) * 100:.0f} %"
        )
        rows.append(row("capacity", f"{label}: tokens lost", [r["lost"] for r in results], "", "0"))
        rows.append(
            row(
                "capacity",
                f"{label}: p95 added latency",
                [r["p95"] for r in results],
                "ms",
                "≤ 250 ms" if view == "json" else "≤ 500 ms",  # issue 27
                note=f"p50 {statistics.median(r['p50'] for r in results):.0f} ms; "
                f"p95 per run {_each(results, 'p95')} ms; floor (echo p95) "
                f"{_each(floors, 'p95')} ms; " + note,
                ratio=[r["p95"] / max(f["p95"], 0.1) for r, f in zip(results, floors)],
            )
        )
        rows.append(
            row(
                "capacity",
                f"{label}: server CPU per event",
                [r["run_event_cpu_us"] for r in results],
                "µs",
                note="whole run: server CPU over events delivered; floor (echo) "
                f"{statistics.median(f['run_event_cpu_us'] for f in floors):.0f} µs",
                ratio=[
                    r["run_event_cpu_us"] / max(f["run_event_cpu_us"], 0.1)
                    for r, f in zip(results, floors)
                ],
            )
        )
        rows.append(
            row(
                "capacity",
                f"{label}: server CPU",
                [r["cpu_share"] * 100 for r in results],
                "% of one core",
                "≤ 100 %",
                note=f"wall {statistics.median(r['wall'] for r in results):.1f} s "
                f"for {results[0]['ideal']:.0f} s of tokens",
            )
        )
        rows.append(
            row(
                "capacity",
                f"{label}: server RSS once the turns have ended",
                [r["rss_after"] for r in results],
                "MiB",
                "≤ 170 MiB",  # issue 45
                note=f"before the turns {statistics.median(r['rss_before'] for r in results):.0f} MiB "
                "(after a warm-up turn and the chats made)",
            )
        )
    return rows


def measure(runs: int = 3) -> list[dict]:
    """Rows for bench/run.py."""
    return per_event(runs) + capacity(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--view", default="json", choices=("json", "html"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--echo", action="store_true", help="run the echo floor only")
    parser.add_argument("--profile", help="py-spy the server over the steady window into this file")
    parser.add_argument("--cprofile", help="cProfile the server over the whole run into this file")
    parser.add_argument("--env", action="append", default=[], help="NAME=value for the server")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    for _ in range(args.runs):
        result = (
            echo_run(args.turns, args.tokens)
            if args.echo
            else numi_run(args.turns, args.tokens, args.view, args.profile, args.cprofile, **env)
        )
        print(describe(result), flush=True)


if __name__ == "__main__":
    main()
