"""A retry within a dead owner's lease window (issue 35, seeds clause 17, Redis only): the
process running a question's turn is killed; before its lease lapses the client resends
the question (same request_id) to another process. The dead turn holds the chat but will
never answer, so the resend is refused with `turn_running` (with or without `queue`),
never acknowledged with `queued: null`; once the lease lapses the resend is answered."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, of_type, turn_server_env
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.redis


def reply(socket) -> dict:
    """The answer to this socket's own send: `queued`, `accepted`, or an error."""
    while True:
        event = socket.receive(timeout=30)
        if event["type"] in ("queued", "accepted") or (
            event["type"] == "error" and event["turn_id"] is None
        ):
            return event


def test_a_retry_in_a_dead_owners_lease_window_is_refused_then_answered(
    live_server_factory, database_templates, redis_settings, tmp_path, scripted, sockets
):
    # Two processes on one SQLite file and one Redis (quicker to start than PostgreSQL's),
    # with a lease long enough that both resends below come while the dead owner holds it.
    database = tmp_path / "shared.db"
    database_templates.sqlite_copy(database)
    env = turn_server_env(
        NUMI_DATABASE_URL=f"sqlite:///{database}",
        NUMI_SECRET_KEY="dead-owner-test-secret",
        NUMI_TURN_LEASE_MS=3000,
        **redis_settings(),
    )
    a, b = live_server_factory(**env), live_server_factory(**env)
    chat = make_chat(Api(a.url), scripted)
    scripted.enqueue(
        Scenario().text(" ".join(f"w{i}" for i in range(400)), chunks=400).delay(0.05),
        Scenario().text("Answered on B."),
    )
    first = sockets(a, chat["id"])
    first.send(type="send", message="First", request_id="first")
    first.events_until("content")  # the question is saved; its turn streams
    a.kill()
    retry = sockets(b, chat["id"])
    for queue in (False, True):
        retry.send(type="send", message="First", request_id="first", queue=queue)
        refused = reply(retry)
        assert refused["type"] == "error", refused  # not `queued {item: null}`
        assert refused["data"]["code"] == "turn_running", refused
    status, body = Api(b.url).post(
        "/api/chat_stream",
        {"session": chat["id"], "message": "First", "request_id": "first", "queue": True},
    )
    assert (status, body["error"]["code"]) == (409, "turn_running"), body  # not 202 queued null
    # The lease lapses and a sweeper closes the dead turn: its followers are told it ended.
    ended = retry.events_until("turn_end", timeout=WAIT_SECONDS)
    assert of_type(ended, "error")[-1]["data"]["code"] == "interrupted"
    retry.send(type="send", message="First", request_id="first", queue=True)
    assert reply(retry)["type"] == "accepted"
    events = retry.events_until("turn_end", timeout=WAIT_SECONDS)
    assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == "Answered on B."
