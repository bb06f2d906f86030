"""Clusters of Numi processes for the scale-out benchmarks (bench/scaleout.py and
bench/scaleout_cpu.py): on one fresh PostgreSQL schema and one Redis key prefix, as `numi
serve` processes or gunicorn workers, loaded with paced streams, with the CPU each process
and Redis spent. Both benchmarks import this module; neither imports the other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import load
from live import ROOT, LiveNumi
from stats import percentile

HERE = Path(__file__).resolve().parent

# The benchmarks measure serving, not the single-user access token check.
OPEN = {"NUMI_AUTH": "none"}
REDIS_URL = os.environ.get("NUMI_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("NUMI_BENCH_DATABASE_URL") or os.environ.get(
    "NUMI_TEST_DATABASE_URL", ""
)


def redis_env() -> dict[str, str] | None:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        print(f"  no Redis at {REDIS_URL} ({exc}): Redis rows skipped")
        return None
    return {"NUMI_REDIS_URL": REDIS_URL, "NUMI_REDIS_PREFIX": f"numibench:{uuid.uuid4().hex[:8]}:"}


def drop_keys(env: dict[str, str]) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=env["NUMI_REDIS_PREFIX"] + "*", count=1000))
    if keys:
        client.delete(*keys)


def postgres_schema():
    import sqlalchemy as sa

    name = "bench_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(
        POSTGRES_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
    )
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    url = sa.engine.make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={name}"})

    def drop():
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        engine.dispose()

    return url.render_as_string(hide_password=False), drop


# Numi's own defaults for every process (a pool of 20 + 20: two processes stay under
# PostgreSQL's default 100 connections); `--env NUMI_DB_POOL_SIZE=...` changes them.
CAPACITY_ENV: dict[str, str] = {}


class GunicornNumi(LiveNumi):
    """`gunicorn -k gevent -w N app:app` on a free port, as README's deployment runs it."""

    def __init__(self, workers: int, **env: str):
        super().__init__(**env)
        self.workers = workers

    def command(self) -> list[str]:
        return [
            str(Path(sys.executable).with_name("gunicorn")),
            "-k",
            "gevent",
            "-w",
            str(self.workers),
            "--worker-connections",
            "100000",
            "--graceful-timeout",
            "2",
            "-b",
            f"127.0.0.1:{self.port}",
            "app:app",
        ]

    def worker_pids(self) -> list[int]:
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as children:
            return [int(pid) for pid in children.read().split()]


class PacedProvider:
    """bench/pacedprovider.py: the scripted provider in its own process."""

    def __init__(self, tokens: int):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "pacedprovider.py"), str(tokens)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines = load.queue.Queue()
        threading.Thread(
            target=load._pump, args=(self.proc.stdout, self.lines), daemon=True
        ).start()
        try:
            self.port = int(load._line(self.lines, time.monotonic() + 60))
        except BaseException:
            self.close()
            raise
        self.openai_base_url = f"http://127.0.0.1:{self.port}/v1"

    def stamps(self, timeout: float = 60) -> dict[str, list[float]]:
        """Each request's token stamps since the last call, by its last user message."""
        self.proc.stdin.write("stamps\n")
        self.proc.stdin.flush()
        return json.loads(load._line(self.lines, time.monotonic() + timeout))

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_queue_wait(pid: int) -> float:
    """Seconds the process was ready to run but waited for a core (/proc/PID/schedstat)."""
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[1]) / 1e9


def redis_pid() -> int | None:
    """redis-server's pid when it runs on this machine (for its CPU), else None."""
    import redis

    try:
        pid = int(redis.Redis.from_url(REDIS_URL, socket_timeout=5).info("server")["process_id"])
        load.cpu_seconds(pid)
        return pid
    except Exception:
        return None


def _client_ports(pids: list[int], server_port: int) -> set[int]:
    """Local ports of the processes' TCP connections to `server_port` on loopback."""
    inodes = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir() if fds.exists() else ():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def postgres_backends(pids: list[int]) -> list[int]:
    """The PostgreSQL backends serving these Numi processes, when PostgreSQL runs on this
    machine: matched by the client port in each backend's title ("… 127.0.0.1(PORT) …"),
    so other users of the same server are not counted."""
    from urllib.parse import urlparse

    parsed = urlparse(POSTGRES_URL.replace("+psycopg", ""))
    if parsed.hostname not in ("127.0.0.1", "localhost"):
        return []
    ports = _client_ports(pids, parsed.port or 5432)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if title.startswith("postgres:") and "(" in title:
            port = title.split("(", 1)[1].split(")", 1)[0]
            if port.isdigit() and int(port) in ports:
                found.append(int(entry.name))
    return found


def _cpu_or_zero(pid: int) -> float:
    try:
        return load.cpu_seconds(pid)
    except OSError:  # a backend that has gone
        return 0.0


@contextmanager
def started(server: str, processes: int, extra: dict[str, str], *, redis: bool = True):
    """`processes` Numi processes on one fresh PostgreSQL schema and one Redis key prefix:
    `numi serve` each on its own port (server="serve"), or one gunicorn with that many
    gevent workers on one port (server="gunicorn"). Yields (servers, {name: pid}). With
    `redis=False`, one process with its turns in memory (the in-process channel)."""
    redis_settings = redis_env() if redis else {}
    if redis_settings is None or not POSTGRES_URL:
        raise RuntimeError("the capacity search needs Redis and PostgreSQL")
    if not redis and processes != 1:
        raise ValueError("without Redis, turns live in one process")
    url, drop = postgres_schema()
    env = {
        **OPEN,
        **redis_settings,
        **CAPACITY_ENV,
        **extra,
        "NUMI_DATABASE_URL": url,
        "NUMI_SECRET_KEY": "bench-" + uuid.uuid4().hex,
    }
    servers: list[LiveNumi] = []
    try:
        if server == "gunicorn":
            numi = GunicornNumi(processes, **env)
            servers.append(numi)
            # Workers would race to migrate a new database: README's order, upgrade first.
            subprocess.run(
                [str(Path(sys.executable).with_name("numi")), "db", "upgrade"],
                env=numi.env,
                cwd=ROOT,
                check=True,
                timeout=180,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            numi.start()
            pids = {f"worker {n + 1}": pid for n, pid in enumerate(numi.worker_pids())}
        else:
            for n in range(processes):
                # One after the other: the first migrates; all share its data dir (uploads).
                numi = LiveNumi(
                    **env, **({"NUMI_DATA_DIR": servers[0].data_dir} if servers else {})
                )
                servers.append(numi)
                numi.start()
            pids = {f"process {n + 1}": numi.proc.pid for n, numi in enumerate(servers)}
        yield servers, pids
    finally:
        for numi in servers:
            numi.stop()
        drop()
        if redis_settings:
            drop_keys(redis_settings)


def capacity_level(
    servers: list[LiveNumi],
    provider: PacedProvider,
    streams: int,
    tokens: int,
    pids: dict[str, int],
) -> dict:
    """`streams` chats, spread evenly over the servers' ports, each answering `tokens`
    tokens at 20/s, all at once: tokens lost, added latency, CPU of every process."""
    began = time.perf_counter()
    first = servers[0]
    first.chat_on(provider.openai_base_url)  # the endpoint, once, before the threads
    with ThreadPoolExecutor(8) as pool:
        chats = list(pool.map(lambda _: first.chat_on(provider.openai_base_url), range(streams)))
    clients = load.Clients(
        "json",
        first.port,
        first.url,
        [f"/ws/{c}" for c in chats],
        tokens,
        servers=[(s.port, s.url) for s in servers],
    )
    try:
        watched = {**pids, "provider": provider.proc.pid}
        redis_server = redis_pid()
        if redis_server:
            watched["redis-server"] = redis_server
        time.sleep(0.5)
        cpu0 = {name: load.cpu_seconds(pid) for name, pid in watched.items()}
        backends0 = {pid: _cpu_or_zero(pid) for pid in postgres_backends(list(pids.values()))}
        waited0 = {name: run_queue_wait(pid) for name, pid in pids.items()}
        # The clients exit when done, so theirs is what the reaped children used, less
        # their CPU up to "go" (connecting).
        clients_before = children_cpu() + sum(load.cpu_seconds(pid) for pid in clients.pids)
        started = clients.go()
        seen, _ = clients.results(timeout=tokens / load.RATE + 60)
        wall = time.perf_counter() - started
        cpu = {
            name: (load.cpu_seconds(pid) - cpu0[name]) / wall * 100 for name, pid in watched.items()
        }
        cpu["load clients"] = (children_cpu() - clients_before) / wall * 100
        backends = set(backends0) | set(postgres_backends(list(pids.values())))
        if backends:
            # A backend that has gone since (the pool closed an overflow connection) took
            # its CPU with it: not counted, an undercount, rather than a negative one.
            ended = {pid: _cpu_or_zero(pid) for pid in backends}
            used = sum(max(0.0, ended[pid] - backends0.get(pid, 0.0)) for pid in backends)
            cpu["postgres"] = used / wall * 100
        # Ready to run but given no CPU: the machine's share of the latency, not Numi's.
        waited = {
            name: (run_queue_wait(pid) - waited0[name]) / wall * 100 for name, pid in pids.items()
        }
    finally:
        clients.kill()
    stamps = provider.stamps()
    latencies, lost = [], 0
    for index in range(streams):
        by_token = seen.get(index, {})
        written = stamps.get(f"Turn {index}", [])
        lost += tokens - len(by_token)
        latencies += [(at - written[n]) * 1000 for n, at in by_token.items() if n < len(written)]
    return {
        "streams": streams,
        "lost": lost,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "wall": wall,
        "cpu": cpu,
        "waited": waited,
        "errors": clients.errors,
        "unended": clients.unended,
        "took": time.perf_counter() - began,
    }
