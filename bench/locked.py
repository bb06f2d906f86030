"""Another chat's stream while a save waits for a SQLite lock (issue 35): another
connection holds the database's write lock (an operator's `sqlite3` session, a `.backup`)
while one chat's finished answer waits to be saved; meanwhile a second chat streams at 50
tokens/s. The figure is that second chat's largest gap between two frames during the lock,
next to the same gap without a lock in the same run (the floor).

SQLite's busy handler sleeps inside the C library, where gevent cannot switch: a save that
waited there (10 s per try) stopped every stream of the process. A save now waits briefly
per try and yields between tries (numi/database.py `brief_lock_waits`).

    python bench/locked.py [--runs 2] [--lock-seconds 20]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import LiveNumi  # noqa: E402
from stats import row  # noqa: E402
from turns import JsonSocket, paced  # noqa: E402

from numi.testing import Scenario, ScriptedProvider  # noqa: E402

RATE = 50  # tokens/s of the chat that streams on
FLOOR_SECONDS = 3.0  # the gap measured without a lock first


def largest_gap(socket: JsonSocket, seconds: float) -> float:
    """The longest time (ms) between two frames of `socket` over the next `seconds`."""
    last = time.perf_counter()
    end = last + seconds
    largest = 0.0
    while last < end:
        socket.ws.receive(timeout=end - last)
        now = time.perf_counter()
        largest = max(largest, now - last)
        last = now
    return largest * 1000


def until(socket: JsonSocket, kind: str) -> None:
    for _, event in socket.events(until=kind, timeout=120):
        pass


def one_run(numi: LiveNumi, provider: ScriptedProvider, lock_seconds: float) -> tuple[float, float]:
    """(largest gap without a lock, largest gap during the lock), ms."""
    provider.reset()
    saver = JsonSocket(numi, numi.chat_on(provider.openai_base_url))
    provider.enqueue(Scenario().text("An answer that waits for its save. ").stall().text("End."))
    saver.send(type="send", message="Save me", request_id=f"saver-{time.time_ns()}")
    until(saver, "content")
    talker = JsonSocket(numi, numi.chat_on(provider.openai_base_url))
    provider.enqueue(paced(int(RATE * (FLOOR_SECONDS + lock_seconds + 2)), RATE))
    talker.send(type="send", message="Talk", request_id=f"talker-{time.time_ns()}")
    until(talker, "content")
    floor = largest_gap(talker, FLOOR_SECONDS)
    lock = sqlite3.connect(f"{numi.data_dir}/numi.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        provider.release()  # the saver's answer ends: its save waits for the lock
        during = largest_gap(talker, lock_seconds)
    finally:
        lock.execute("COMMIT")
        lock.close()
    events = [event for _, event in saver.events(until="turn_end", timeout=120)]
    if not any(e["type"] == "save_retry" for e in events):
        raise RuntimeError(f"the save never waited for the lock: {json.dumps(events)[:500]}")
    until(talker, "turn_end")
    saver.close()
    talker.close()
    return floor, during


def measure(runs: int = 2, lock_seconds: float = 20.0) -> list[dict]:
    with ScriptedProvider() as provider, LiveNumi(NUMI_SAVE_RETRY_SECONDS=300) as numi:
        results = [one_run(numi, provider, lock_seconds) for _ in range(runs)]
    return [
        row(
            "locked",
            f"another chat's largest frame gap during a {lock_seconds:.0f} s SQLite lock",
            [during for _, during in results],
            "ms",
            "≤ 200 ms",
            note=f"floor: the same gap without a lock ({FLOOR_SECONDS:.0f} s), {RATE} tokens/s",
            ratio=[during / floor for floor, during in results],
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--lock-seconds", type=float, default=20.0)
    arguments = parser.parse_args()
    for result in measure(arguments.runs, arguments.lock_seconds):
        print(result)
