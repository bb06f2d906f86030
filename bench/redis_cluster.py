"""Redis Cluster (issue 45): a 3-master cluster of the machine's `redis-server` on loopback,
and Numi's turn-table keys for many chats written to it, to show how the hash-tag groups
(numi/turns/redis_keys.py) spread the chats over the nodes, and that every command Numi
sends for one chat (its scripts take the chat's keys and its group's) stays in one slot.

    python bench/redis_cluster.py [--chats 3000] [--nodes 3]

Each chat's keys and its group's keys go, in one command, to the node that owns their
slot, so a key of another slot in the same command would be refused (CROSSSLOT) by that
node. What this does not show: Numi's reader takes every group in one XREAD
(`READERS = 1`), which a cluster refuses; on a cluster it would need one reader per group
(README, "Many processes and hosts"). Rows are counts, not timings.
"""

from __future__ import annotations

import argparse
import random
import socket
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from numi.turns.redis_keys import GROUPS, chat_group, chat_key
from stats import row

PREFIX = "numi:"
CHAT_KEYS = ("seq", "events", "turn", "lease")
GROUP_KEYS = ("running", "alive", "recovering")
STARTUP_SECONDS = 60


def available() -> str | None:
    """None when a cluster can run here, else why not."""
    for program in ("redis-server", "redis-cli"):
        if shutil.which(program) is None:
            return f"no `{program}` on PATH"
    return None


def _cluster_port() -> int:
    """A port free with its cluster bus port (port + 10000, which must stay ≤ 65535: the
    kernel's ephemeral ports would overflow it)."""
    while True:
        port = random.randrange(20000, 30000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


def _wait(check, what: str, seconds: float = STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError(f"the Redis Cluster did not {what} in {seconds:.0f} s")


@contextmanager
def running_cluster(nodes: int = 3):
    """`nodes` masters, no replicas, no persistence, in a throwaway directory: yields
    {port: client}."""
    import redis

    workdir = Path(tempfile.mkdtemp(prefix="numi-redis-cluster-"))
    procs: list[subprocess.Popen] = []
    ports: list[int] = []
    while len(ports) < nodes:
        port = _cluster_port()
        if not {port, port + 10000} & {p + d for p in ports for d in (0, 10000)}:
            ports.append(port)
    try:
        for port in ports:
            node_dir = workdir / str(port)
            node_dir.mkdir()
            procs.append(
                subprocess.Popen(
                    ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                     "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--save", "", "--appendonly", "no", "--dir", str(node_dir)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )  # fmt: skip
        clients = {port: redis.Redis(port=port, socket_timeout=10) for port in ports}

        def answering() -> bool:
            if any(proc.poll() is not None for proc in procs):
                raise RuntimeError("a redis-server of the cluster exited at start")
            try:
                return all(client.ping() for client in clients.values())
            except redis.ConnectionError:
                return False

        _wait(answering, "answer")
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=STARTUP_SECONDS,
        )  # fmt: skip
        _wait(
            lambda: all(
                c.execute_command("CLUSTER INFO").get("cluster_state") == "ok"
                for c in clients.values()
            ),
            "reach cluster_state:ok",
        )
        yield clients
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def _owners(client) -> dict[int, int]:
    """slot -> port of the master that owns it."""
    owners: dict[int, int] = {}
    for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
        for slot in range(int(start), int(end) + 1):
            owners[slot] = int(master[1])
    return owners


def spread(chats: int = 3000, nodes: int = 3) -> dict:
    """Write `chats` chats' keys to a fresh cluster, each chat's in one command to the node
    owning its slot. Returns chats and groups per node and the commands refused."""
    from redis.crc import key_slot

    with running_cluster(nodes) as clients:
        owners = _owners(next(iter(clients.values())))
        per_node: Counter[int] = Counter()
        groups_per_node: dict[int, set[int]] = {port: set() for port in clients}
        refused = 0
        for _ in range(chats):
            chat_id = str(uuid.uuid4())
            group = chat_group(chat_id)
            keys = [chat_key(PREFIX, chat_id, name) for name in CHAT_KEYS] + [
                f"{PREFIX}{{{group}}}{name}" for name in GROUP_KEYS
            ]
            port = owners[key_slot(keys[0].encode())]
            try:
                # One command over all of the chat's keys, as Numi's scripts take them: the
                # node refuses it if any key is in another slot (CROSSSLOT) or not its own.
                clients[port].eval(
                    "for i, k in ipairs(KEYS) do redis.call('INCR', k) end return #KEYS",
                    len(keys),
                    *keys,
                )
            except Exception:
                refused += 1
                continue
            per_node[port] += 1
            groups_per_node[port].add(group)
        sizes = {port: int(client.dbsize()) for port, client in clients.items()}
        # The control: keys of two groups in one command must be refused, or the count of
        # refusals above would prove nothing.
        try:
            clients[owners[key_slot(b"{0}")]].eval("return 1", 2, "{0}x", "{1}x")
            control_refused = False
        except Exception:
            control_refused = True
    return {
        "chats": chats,
        "per_node": [per_node[port] for port in sorted(clients)],
        "groups_per_node": [len(groups_per_node[port]) for port in sorted(clients)],
        "keys_per_node": [sizes[port] for port in sorted(clients)],
        "refused": refused,
        "control_refused": control_refused,
    }


def measure(chats: int = 3000, nodes: int = 3) -> list[dict]:
    """Rows for bench/run.py (none, with a note on stdout, when no cluster can run)."""
    why = available()
    if why:
        print(f"    redis-cluster: left out, {why}")
        return []
    result = spread(chats, nodes)
    shares = [n / max(result["chats"] - result["refused"], 1) for n in result["per_node"]]
    layout = (
        f"chats per node {', '.join(map(str, result['per_node']))}; hash-tag groups per node "
        f"{', '.join(map(str, result['groups_per_node']))} of {GROUPS}; keys per node "
        f"{', '.join(map(str, result['keys_per_node']))}"
    )
    return [
        row("redis cluster", f"{nodes} masters, {chats:,} chats: largest node's share of the chats",
            [max(shares) * 100], "%", f"≤ {100 / nodes * 1.5:.0f} %", note=layout),
        row("redis cluster", "commands over one chat's keys refused by the cluster (CROSSSLOT)",
            [result["refused"]], "", "0",
            note="each chat's keys and its group's in one EVAL, to the node owning their slot; "
            f"the control (keys of two groups in one EVAL) refused: {result['control_refused']}"),
    ]  # fmt: skip


def main(argv: list[str]) -> None:
    from stats import table

    parser = argparse.ArgumentParser(prog="bench/redis_cluster.py", description=__doc__)
    parser.add_argument("--chats", type=int, default=3000)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args(argv)
    print(table(measure(args.chats, args.nodes)))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1:])
