"""A retried question while another turn of the chat runs (issue 35, seeds clause 17): its
own turn died (a provider 400 here; kill -9 in tests/scaleout/test_dead_owner_retry.py),
another turn started, and the client resends it with the same request_id and
`queue: true`, as the page's outbox does. It is queued and answered when the running turn
ends, never acknowledged with `queued: null` and dropped. Both backends, both transports."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, Socket, wait_until


def queued_reply(ws) -> dict:
    """This client's answer to its send: the `queued` data, or the refusal's error data."""
    while True:
        event = ws.receive()
        if event["type"] == "queued" or (event["type"] == "error" and event["turn_id"] is None):
            return event["data"]


@pytest.mark.parametrize("transport", ["websocket", "chat_stream"])
def test_a_retried_question_queues_behind_another_running_turn_and_is_answered(
    server, api: Api, chat, scripted, transport
):
    ws = Socket(server, chat["id"])
    try:
        scripted.enqueue(Scenario.http_error(400))
        ws.send(type="send", message="First", request_id="first")
        ws.events_until("turn_end")  # failed: the question is saved, unanswered
        scripted.enqueue(Scenario().text("Answer two.").stall())
        ws.send(type="send", message="Second", request_id="second")
        ws.events_until("content")
        retry = {"message": "First", "request_id": "first", "queue": True}
        if transport == "websocket":
            ws.send(type="send", **retry)
            item = queued_reply(ws)["item"]
        else:
            status, body = api.post("/api/chat_stream", {"session": chat["id"], **retry})
            assert status == 202, body
            item = body["queued"]
        assert item is not None and item["request_id"] == "first"  # queued, not dropped
        scripted.enqueue(Scenario().text("Answer one."))
        ws.send(type="stop")  # a stopped turn goes on with the queue
        wait_until(
            lambda: any(m["content"] == "Answer one." for m in api.history(chat["id"])),
            what="the retried question's answer",
        )
    finally:
        ws.close()
    questions = [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"]
    assert questions.count("First") == 1  # answered, not asked twice
