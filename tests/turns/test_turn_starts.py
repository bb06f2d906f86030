"""The turn manager's start gate (numi/turns/turn.py, `StartGate`): sends that arrive
together prepare one at a time, every way a start ends gives the gate back, and the starts
behind a stuck one go ahead instead of stalling. In-process, on each database backend: the
gate is this process's own object."""

from __future__ import annotations

import json
import time

import gevent
import pytest

from fixtures.provider import add_scripted_endpoint

from numi.extensions import turn_manager
from numi.testing import Scenario
from server_wait import WAIT_SECONDS


@pytest.fixture
def app(make_app):
    # Titles are model calls of their own: they would take the scripted answers.
    return make_app(NUMI_GENERATE_TITLES=False)


@pytest.fixture
def endpoint_id(client, scripted):
    return add_scripted_endpoint(client, scripted)


def new_chat(client, endpoint_id=None) -> str:
    body = (
        {"endpoint_id": endpoint_id, "model": "fake-model"}
        if endpoint_id
        else {"title": "no model"}
    )
    response = client.post("/api/session", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def send(client, chat_id: str, message: str) -> list[dict]:
    """POST /api/chat_stream and read its events to the turn's end."""
    response = client.post("/api/chat_stream", json={"session": chat_id, "message": message})
    assert response.status_code == 200, response.get_data(as_text=True)
    return [
        json.loads(line[len("data: ") :])
        for line in response.get_data(as_text=True).splitlines()
        if line.startswith("data: ")
    ]


def text_of(events: list[dict]) -> str:
    return "".join(e["data"]["delta"] for e in events if e["type"] == "content")


def gate_is_free(app) -> bool:
    return turn_manager(app).starts.free


def wait_idle(app) -> None:
    deadline = time.monotonic() + 15
    while turn_manager(app).turns:
        assert time.monotonic() < deadline, "a turn did not end"
        gevent.sleep(0.02)


def test_a_burst_of_sends_all_answer_and_the_gate_is_free_after(app, client, scripted, endpoint_id):
    chats = [new_chat(client, endpoint_id) for _ in range(8)]
    for n in range(len(chats)):
        scripted.enqueue(Scenario().text(f"Answer {n}.", chunks=3))
    results = [
        gevent.spawn(send, app.test_client(), chat_id, f"Question {n}")
        for n, chat_id in enumerate(chats)
    ]
    gevent.joinall(results, timeout=WAIT_SECONDS, raise_error=True)
    assert all(r.ready() for r in results), "a send did not finish"
    answers = sorted(text_of(r.value) for r in results)
    assert answers == sorted(f"Answer {n}." for n in range(len(chats)))
    wait_idle(app)
    assert gate_is_free(app)


def test_starts_that_end_before_the_model_give_the_gate_back(app, client, scripted):
    """No model to answer with, a missing attachment, and a stop while waiting for the
    gate: each ends its turn before any model call, and the next send still answers."""
    no_model = new_chat(client)  # before any endpoint exists: nothing to fall back on
    events = send(client, no_model, "Anyone?")
    assert [e["data"]["code"] for e in events if e["type"] == "error"], events
    chat_id = new_chat(client, add_scripted_endpoint(client, scripted))
    response = client.post(
        "/api/chat_stream",
        json={"session": chat_id, "message": "see file", "attachments": [987654]},
    )
    assert response.status_code in (200, 400, 404), response.get_data(as_text=True)
    wait_idle(app)
    assert gate_is_free(app)

    gate = turn_manager(app).starts
    assert gate.enter()  # a start in progress elsewhere
    stopped = gevent.spawn(send, app.test_client(), chat_id, "stop me before I start")
    deadline = time.monotonic() + 10
    while chat_id not in turn_manager(app).turns:
        assert time.monotonic() < deadline, "the turn did not start"
        gevent.sleep(0.01)
    turn_manager(app).stop(chat_id)
    gate.leave()
    stopped.join(timeout=15)
    assert stopped.successful() and "turn_end" in [e["type"] for e in stopped.value]
    wait_idle(app)
    assert gate_is_free(app)

    scripted.enqueue(Scenario().text("Still here."))
    assert text_of(send(client, chat_id, "And now?")) == "Still here."
    assert gate_is_free(app)


def test_the_starts_behind_a_stuck_one_go_ahead(app, client, scripted, endpoint_id):
    """As if a start held the gate, stuck on a slow address lookup: the next turn waits
    until the holder has held it for `stuck_after`, then prepares and answers anyway."""
    chat_id = new_chat(client, endpoint_id)
    scripted.enqueue(Scenario().text("Answered despite the stuck start."))
    gate = turn_manager(app).starts
    assert gate.enter()
    try:
        started = time.monotonic()
        events = send(client, chat_id, "Go ahead")
        waited = time.monotonic() - started
        assert not gate.free, "the stuck start still holds the gate"
    finally:
        gate.leave()
    assert text_of(events) == "Answered despite the stuck start."
    # It did wait for the gate first (the holder's time is what let it through).
    assert waited >= gate.stuck_after * 0.9
    wait_idle(app)
    assert gate_is_free(app)


def test_a_long_queue_behind_a_working_gate_waits_its_turn():
    """Waiting long is no sign of a stuck holder: a start queued behind holders that each
    leave in time keeps waiting for the gate, however long the queue."""
    from numi.turns.turn import StartGate

    gate = StartGate(stuck_after=0.2)
    order = []

    def start(n):
        held = gate.enter()
        order.append((n, held))
        gevent.sleep(0.1)  # each holder works for half the stuck limit
        if held:
            gate.leave()

    starts = [gevent.spawn(start, n) for n in range(8)]  # the last waits 0.7 s, 3.5× the limit
    gevent.joinall(starts, timeout=WAIT_SECONDS, raise_error=True)
    assert order == [(n, True) for n in range(8)]
    assert gate.free
