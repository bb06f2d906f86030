"""What the tests of saves through outages share: an answer that waits (a stalled
provider) for the test's fault, and the faults themselves (a SQLite lock held by another
connection, a private PostgreSQL cluster stopped)."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

from numi.testing import Scenario

from turn_support import (
    Socket,
    make_chat,
    of_type,
)

# The servers of a module share its cluster's database, and so the endpoint keys sealed
# with this secret.
SECRET = "reliability-test-secret"
FIRST, REST = "Kept through the outage. " * 40, "The end."


def start_answer(server, api, scripted, request_id: str):
    """A chat whose answer has begun streaming and waits (a stalled provider) for the
    test's fault: returns (chat, socket)."""
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text(FIRST, chunks=4).stall().text(REST))
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="Tell me", request_id=request_id)
    ws.events_until("content", timeout=60)
    return chat, ws


def notices(events) -> list[dict]:
    """The data of the `save_retry` events among `events`."""
    return [e["data"] for e in of_type(events, "save_retry")]


@contextmanager
def sqlite_lock(database_url: str):
    """Another connection holds the SQLite database's write lock (an operator's `sqlite3`
    session, a `.backup`) for the block."""
    lock = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        lock.execute("COMMIT")
        lock.close()


@contextmanager
def postgres_stopped(cluster):
    """The private PostgreSQL cluster is down for the block."""
    cluster.stop()
    try:
        yield
    finally:
        cluster.start()
