"""Queued follow-ups against a live server: a send with `queue: true` while a turn runs
waits in the database and starts when the turn ends, in order, with no client connected."""

from __future__ import annotations

import pytest

from numi.testing import Scenario

from turn_support import SSE, Api, Socket, make_chat, of_type, turn_server_env, wait_until


def roles_and_texts(api, chat_id):
    return [(m["role"], m["content"]) for m in api.history(chat_id)]


def queued(ws) -> dict:
    """The `queued` acknowledgment of this client's send (other events may come first)."""
    while True:
        event = ws.receive()
        if event["type"] == "queued":
            return event["data"]
        if event["type"] == "error" and event["turn_id"] is None:
            raise AssertionError(event)


def start_stalled_turn(scripted, ws, text="First"):
    scripted.enqueue(Scenario().text("Answer one.").stall())
    ws.send(type="send", message=text, request_id=f"r-{text}")
    ws.events_until("content")


@pytest.fixture
def queue_server(database_url, live_server_factory):
    """A live server on each backend (the queue is a table; the turn-end hook reads it)."""
    started = live_server_factory(**turn_server_env(NUMI_DATABASE_URL=database_url))
    yield started
    started.stop()


def test_two_follow_ups_run_in_order_after_every_client_closed(queue_server, scripted):
    api = Api(queue_server.url, token=queue_server.token)
    chat = make_chat(api, scripted)
    ws = Socket(queue_server, chat["id"])
    start_stalled_turn(scripted, ws)
    scripted.enqueue(Scenario().text("Answer two."), Scenario().text("Answer three."))
    ws.send(type="send", message="Second", request_id="r-2", queue=True)
    assert queued(ws)["item"]["message"] == "Second"
    ws.send(type="send", message="Third", request_id="r-3", queue=True)
    assert queued(ws)["request_id"] == "r-3"
    # The same request again (a page resending after a lost answer) is the same item.
    ws.send(type="send", message="Third", request_id="r-3", queue=True)
    assert queued(ws)["item"]["request_id"] == "r-3"
    status, body = api.get(f"/api/session/{chat['id']}/queue")
    assert (
        status == 200
        and [i["message"] for i in body["items"]] == ["Second", "Third"]
        and not body["paused"]
    )
    ws.close()  # every browser gone: the queue goes on without them
    scripted.release()
    expected = [
        ("user", "First"),
        ("assistant", "Answer one."),
        ("user", "Second"),
        ("assistant", "Answer two."),
        ("user", "Third"),
        ("assistant", "Answer three."),
    ]
    wait_until(
        lambda: roles_and_texts(api, chat["id"]) == expected,
        timeout=30,
        what="both follow-ups answered",
    )
    assert api.get(f"/api/session/{chat['id']}/queue")[1] == {"items": [], "paused": False}
    assert [m["request_id"] for m in api.history(chat["id"]) if m["role"] == "user"] == [
        "r-First",
        "r-2",
        "r-3",
    ]
    # The model saw each follow-up after the answer before it.
    last = scripted.wait_for_requests(3).body["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["First", "Second", "Third"]


def test_without_queue_a_send_while_running_is_refused(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    ws.send(type="send", message="Impatient", request_id="r-x")
    events = ws.events_until("error")
    assert events[-1]["data"]["code"] == "turn_running" and events[-1]["turn_id"] is None
    assert api.get(f"/api/session/{chat['id']}/queue")[1]["items"] == []
    scripted.release()
    ws.events_until("turn_end")
    assert [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"] == ["First"]


def test_edit_and_remove_queued_messages_before_they_start(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    scripted.enqueue(Scenario().text("Answer to the edit."))
    ws.send(type="send", message="Typo", request_id="r-a", queue=True)
    first = queued(ws)["item"]
    ws.send(type="send", message="Never mind", request_id="r-b", queue=True)
    second = queued(ws)["item"]
    base = f"/api/session/{chat['id']}/queue"
    status, body = api.call("PATCH", f"{base}/{first['id']}", {"message": "Fixed"})
    assert status == 200 and body["item"]["message"] == "Fixed"
    status, body = api.call("PATCH", f"{base}/{first['id']}", {"message": "   "})
    assert status == 400 and body["error"]["code"] == "empty_message"
    status, body = api.call("DELETE", f"{base}/{second['id']}")
    assert status == 200 and [i["id"] for i in body["items"]] == [first["id"]]
    # Every client hears of each change (queue events: the whole list).
    while [i["message"] for i in ws.events_until("queue")[-1]["data"]["items"]] != ["Fixed"]:
        pass
    scripted.release()
    wait_until(
        lambda: len(api.history(chat["id"])) == 4, timeout=20, what="the edited follow-up answered"
    )
    assert roles_and_texts(api, chat["id"])[2:] == [
        ("user", "Fixed"),
        ("assistant", "Answer to the edit."),
    ]
    # Once started, an item is no longer in the queue: editing it is a 404.
    status, body = api.call("PATCH", f"{base}/{first['id']}", {"message": "Too late"})
    assert status == 404 and body["error"]["code"] == "not_found"
    assert len(scripted.requests) == 2


def test_stop_and_clear_queue_ends_the_turn_and_drops_what_waits(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    for n in (1, 2):
        ws.send(type="send", message=f"Later {n}", request_id=f"r-later-{n}", queue=True)
        queued(ws)
    ws.send(type="stop", clear_queue=True)
    events = ws.events_until("turn_end")
    assert of_type(events, "error")[-1]["data"]["code"] == "cancelled"
    assert of_type(events, "queue")[-1]["data"]["items"] == []
    assert api.get(f"/api/session/{chat['id']}/queue")[1]["items"] == []
    # Had the queue survived, its items would be answered before the next send.
    scripted.enqueue(*[Scenario().text(f"Answer {n}.") for n in range(3)])
    ws.send(type="send", message="After", request_id="r-after", queue=True)

    def answered_after() -> bool:  # one read of the history: "After", then its answer
        roles = [(m["role"], m["content"]) for m in api.history(chat["id"])]
        return ("user", "After") in roles and roles[-1][0] == "assistant" and roles[-1] != roles[1]

    wait_until(answered_after, timeout=20, what="the next send answered")
    assert [m["content"] for m in api.history(chat["id"]) if m["role"] == "user"] == [
        "First",
        "After",
    ]
    assert len(scripted.requests) == 2, "nothing queued started"


def test_plain_stop_goes_on_with_the_queue(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    scripted.enqueue(Scenario().text("Next answer."))
    ws.send(type="send", message="Next", request_id="r-next", queue=True)
    queued(ws)
    ws.send(type="stop")
    ws.events_until("turn_end")  # the stopped turn
    events = ws.events_until("turn_end")  # the follow-up's
    assert of_type(events, "content")[0]["data"]["delta"].startswith("Next")
    assert roles_and_texts(api, chat["id"])[2:] == [("user", "Next"), ("assistant", "Next answer.")]


def test_a_failed_turn_pauses_the_queue_until_resumed(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    scripted.enqueue(Scenario().text("Half").stall().error_event("overloaded"))
    ws.send(type="send", message="First", request_id="r-first")
    ws.events_until("content")
    ws.send(type="send", message="After the failure", request_id="r-after", queue=True)
    queued(ws)
    scripted.enqueue(Scenario().text("Resumed answer."))
    scripted.release()
    events = ws.events_until("turn_end")
    assert of_type(events, "error")[-1]["data"]["code"] != "cancelled"
    paused = ws.events_until("queue")[-1]["data"]
    while not paused["paused"]:
        paused = ws.events_until("queue")[-1]["data"]
    assert [i["message"] for i in paused["items"]] == ["After the failure"]
    assert api.get(f"/api/session/{chat['id']}/queue")[1]["paused"] is True
    assert len(scripted.requests) == 1
    status, body = api.post(f"/api/session/{chat['id']}/queue/resume")
    assert status == 200 and body["started"] is True and body["items"] == []
    ws.events_until("turn_end")
    assert roles_and_texts(api, chat["id"])[-2:] == [
        ("user", "After the failure"),
        ("assistant", "Resumed answer."),
    ]


def test_sse_send_with_queue_answers_202_with_the_item(server, api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    scripted.enqueue(Scenario().text("Via SSE."))
    stream = SSE(
        server,
        "POST",
        "/api/chat_stream",
        {"session": chat["id"], "message": "From a program", "request_id": "r-sse", "queue": True},
    )
    try:
        assert stream.response.status == 202
        import json

        body = json.loads(stream.response.read())
        assert (
            body["queued"]["message"] == "From a program"
            and body["queued"]["request_id"] == "r-sse"
        )
    finally:
        stream.close()
    stream = SSE(server, "POST", "/api/chat_stream", {"session": chat["id"], "message": "No queue"})
    try:
        assert stream.response.status == 409
    finally:
        stream.close()
    scripted.release()
    wait_until(
        lambda: roles_and_texts(api, chat["id"])[-1:] == [("assistant", "Via SSE.")],
        timeout=20,
        what="the SSE follow-up answered",
    )


def test_queue_limits_and_bad_values(api, scripted, chat, sockets):
    ws = sockets(chat["id"])
    start_stalled_turn(scripted, ws)
    for n in range(20):
        ws.send(type="send", message=f"m{n}", request_id=f"r-{n}", queue=True)
        queued(ws)
    ws.send(type="send", message="one too many", request_id="r-21", queue=True)
    error = ws.events_until("error")[-1]["data"]
    assert error["code"] == "queue_full"
    ws.send(type="send", message="x", request_id="r-22", queue="maybe")
    assert ws.events_until("error")[-1]["data"]["code"] == "invalid_input"
    ws.send(type="send", message="m0 but different", request_id="r-0", queue=True)
    assert ws.events_until("error")[-1]["data"]["code"] == "request_id_reused"
    assert len(api.get(f"/api/session/{chat['id']}/queue")[1]["items"]) == 20
    ws.send(type="stop", clear_queue=True)
    ws.events_until("turn_end")
    assert len(scripted.requests) == 1
