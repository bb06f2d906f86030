"""A stopped answer counts usage (issue 35): the provider billed the prompt it read and
the tokens it sent, but reports usage only at a stream's end, which a stopped answer
never reaches. What it did not report is estimated and marked so, for a single answer and
for a compare lane, and the usage page counts it. A live server, the scripted provider
through the real SDKs, real WebSocket clients."""

from __future__ import annotations

import json

from numi.testing import Scenario
from turn_support import db_rows, of_type
from server_wait import WAIT_SECONDS

TEXT = "one two three four five six seven eight nine ten"


def usage_total(api) -> dict:
    status, body = api.get("/api/usage?period=today&group=model")
    assert status == 200, body
    return body["total"]


def test_a_stopped_answer_counts_what_it_spent(api, scripted, chat, sockets):
    before = usage_total(api)
    scripted.enqueue(Scenario().text(TEXT, chunks=10).delay(0.1).usage(40, 12))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Count slowly")
    ws.events_until("content")
    ws.send(type="stop")
    events = ws.events_until("turn_end")
    assert of_type(events, "error")[0]["data"]["code"] == "cancelled"

    answer = api.history(chat["id"])[-1]
    usage = answer["meta"]["usage"]
    assert answer["meta"]["partial"] and usage["estimated"] is True
    assert usage["input_tokens"] > 0 and usage["output_tokens"] >= 1
    after = usage_total(api)
    assert after["input_tokens"] - before["input_tokens"] == usage["input_tokens"]
    assert after["output_tokens"] - before["output_tokens"] == usage["output_tokens"]


def test_a_stopped_compare_lane_counts_what_it_spent(server, api, scripted, chat, sockets):
    models = ["model-a", "model-b"]
    scripted.enqueue(Scenario().text("Alpha answers.").usage(20, 7), model="model-a")
    scripted.enqueue(Scenario().text("Bravo ").stall().text("never."), model="model-b")
    ws = sockets(chat["id"])
    compare = [{"endpoint_id": chat["endpoint"]["id"], "model": model} for model in models]
    ws.send(type="send", message="Compare and stop one", compare=compare)
    events = []
    while not (
        of_type(events, "done")
        and any(e["data"].get("lane") == 1 for e in of_type(events, "content"))
    ):
        events.append(ws.receive(timeout=15))
    ws.send(type="stop", lane=1)
    events += ws.events_until("turn_end", timeout=WAIT_SECONDS)

    question = of_type(events, "accepted")[0]["data"]["message_id"]
    saved = {
        json.loads(meta)["lane"]: json.loads(meta)
        for (meta,) in db_rows(
            server,
            "SELECT meta_json FROM messages WHERE chat_id = ? AND parent_id = ? AND role = 'assistant'",
            chat["id"],
            question,
        )
    }
    # The lane that finished counts what its provider reported; the stopped one estimates.
    reported = saved[0]["usage"]
    assert (reported["input_tokens"], reported["output_tokens"]) == (20, 7)
    assert "estimated" not in reported
    stopped = saved[1]["usage"]
    assert saved[1]["error"]["code"] == "cancelled" and stopped["estimated"] is True
    assert stopped["input_tokens"] > 0 and stopped["output_tokens"] >= 1
