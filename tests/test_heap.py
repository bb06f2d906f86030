"""numi/heap.py: once a process's turns have ended, their cyclic garbage is collected and
glibc's free pages are returned, once the after-work is done and at most once per interval."""

from __future__ import annotations

import gc
import time
import weakref

import gevent
import pytest

from numi.heap import HeapRelease

from server_wait import WAIT_SECONDS


class Answer:
    """Stands for an ended turn's objects: they refer to each other, as a turn's agent and
    its context window do, so only the cyclic collector frees them."""

    def __init__(self) -> None:
        self.me = self


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited in vain for {what}")
        gevent.sleep(0.01)


@pytest.fixture
def no_automatic_collection():
    """Only the release collects here, so what it frees is its doing."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_the_garbage_of_ended_turns_is_freed_once_their_after_work_is_done(
    no_automatic_collection,
):
    state = {"running": False, "settling": True}
    asked = []

    def settling() -> bool:
        asked.append(True)
        return state["settling"]

    heap = HeapRelease(lambda: state["running"], settling, delay=0.01)
    left = weakref.ref(Answer())
    heap.turns_ended()
    wait_for(lambda: len(asked) >= 3, "three looks at the after-work")
    assert left() is not None and heap.last is None  # it waits for the work, not for time
    state["settling"] = False
    wait_for(lambda: heap.last is not None, "the release")
    assert left() is None
    assert heap.last.collected >= 1


def test_no_release_while_a_turn_runs_and_at_most_one_per_interval(no_automatic_collection):
    state = {"running": True}
    heap = HeapRelease(lambda: state["running"], lambda: False, delay=0.01, interval=0.3)
    heap.turns_ended()
    wait_for(lambda: heap._waiting.dead, "the waiting greenlet to give up")
    assert heap.last is None  # a turn started again: its end asks anew
    state["running"] = False
    heap.turns_ended()
    wait_for(lambda: heap.last is not None, "the first release")
    first = heap.released_at
    heap.turns_ended()
    wait_for(lambda: heap.released_at > first, "the second release")
    assert heap.released_at - first >= 0.3
