"""A retried request_id is answered by its own turn (issue 20 item 9): after a crash cut a
question's turn short and a later question was answered, resending the first one answers
it, on its own branch, instead of naming the later answer. Live `numi serve` killed with
SIGKILL, the scripted provider, real WebSocket clients; SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from numi.testing import Scenario

from turn_support import Socket, make_chat, of_type, turn_server_env


@pytest.fixture(scope="module")
def server(live_server_factory, module_database_url):
    started = live_server_factory(**turn_server_env(NUMI_DATABASE_URL=module_database_url))
    yield started
    started.stop()


def _send(server, chat_id: str, message: str, request_id: str) -> list[dict]:
    ws = Socket(server, chat_id)
    try:
        ws.send(type="send", message=message, request_id=request_id)
        return ws.events_until("turn_end", timeout=60)
    finally:
        ws.close()


def test_a_question_cut_short_by_a_crash_is_answered_on_its_own_branch(server, api, scripted):
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("lost in the crash", chunks=2).stall())
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="First question", request_id="first")
    ws.events_until("content", timeout=60)
    ws.close()
    server.kill()
    scripted.release()
    server.start()
    scripted.reset()

    scripted.enqueue(Scenario().text("Second answer."))
    second = _send(server, chat["id"], "Second question", "second")
    second_answer = of_type(second, "done")[0]["data"]["message_id"]

    # The first question, resent after the crash and the later turn: answered now, from
    # the history up to itself (before: `done` named the second answer, nothing was asked).
    scripted.enqueue(Scenario().text("First answer."))
    first = _send(server, chat["id"], "First question", "first")
    [done] = of_type(first, "done")
    assert done["data"]["message_id"] != second_answer
    assert len(scripted.requests) == 2
    sent = [m["content"] for m in scripted.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == ["First question"], sent
    shown = api.history(chat["id"])
    assert [m["content"] for m in shown] == ["First question", "First answer."]
    assert shown[-1]["id"] == done["data"]["message_id"]
    # The later turn stays, as the other version after the first question.
    assert shown[-1]["parent_id"] == shown[0]["id"]
    assert shown[-1]["version"]["m"] == 2

    # Retried again, each request names its own answer and asks nothing.
    again = _send(server, chat["id"], "First question", "first")
    assert of_type(again, "done")[0]["data"]["message_id"] == done["data"]["message_id"]
    again = _send(server, chat["id"], "Second question", "second")
    assert of_type(again, "done")[0]["data"]["message_id"] == second_answer
    assert len(scripted.requests) == 2
