"""Compare: one question answered by several routes at once, in lanes, against a live
server on both turn-channel backends (tests/turns/conftest.py), through the scripted
provider and the real SDKs.

Each lane is a model of the scripted provider's own queue (`enqueue(..., model=...)`), so
which lane gets which answer does not depend on the order the requests arrive."""

from __future__ import annotations

import json

import pytest

from import_support import api_imported_chat

from numi.testing import Scenario

from turn_support import SSE, db_rows, of_type, types
from server_wait import WAIT_SECONDS

MODELS = ["model-a", "model-b", "model-c"]
ANSWERS = {
    "model-a": "Alpha answers first and plainly.",
    "model-b": "Bravo answers second, at more length than alpha.",
    "model-c": "Charlie answers third.",
}


def compare_of(chat, models=MODELS):
    return [{"endpoint_id": chat["endpoint"]["id"], "model": model} for model in models]


def enqueue_answers(scripted, *, chunks=6, delay=0.0):
    for model, text in ANSWERS.items():
        scripted.enqueue(
            Scenario().text(text, chunks=chunks).delay(delay).usage(20, 7), model=model
        )


def lane_text(events, lane):
    return "".join(
        e["data"]["delta"]
        for e in events
        if e["type"] == "content" and e["data"].get("lane") == lane
    )


def rows(server, chat_id):
    return db_rows(
        server,
        "SELECT id, role, parent_id, selected, active, content, meta_json FROM messages "
        "WHERE chat_id = ? ORDER BY id",
        chat_id,
    )


def lane_rows(server, chat_id, question_id):
    """The answers saved under the question, by lane: (id, selected, active, content, meta)."""
    found = {}
    for id_, role, parent, selected, active, content, meta in rows(server, chat_id):
        if parent == question_id and role == "assistant":
            meta = json.loads(meta or "{}")
            found[meta["lane"]] = (id_, bool(selected), bool(active), content, meta)
    return found


def test_three_lanes_stream_side_by_side_and_save_as_versions(server, api, scripted, chat, sockets):
    enqueue_answers(scripted)
    ws = sockets(chat["id"])
    ws.send(type="send", message="Who answers?", compare=compare_of(chat), request_id="cmp-1")
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)

    assert len({e["turn_id"] for e in events}) == 1, "one turn, one turn_id"
    assert types(events).count("turn_end") == 1 and events[-1]["type"] == "turn_end"
    lanes = of_type(events, "lanes")[0]["data"]["lanes"]
    assert [(lane["lane"], lane["model"]) for lane in lanes] == list(enumerate(MODELS))
    for lane, model in enumerate(MODELS):
        assert lane_text(events, lane) == ANSWERS[model], [(e["type"], e["data"]) for e in events]
    # Every event of a model step names its lane; the question's events do not.
    for kind in ("content", "message_saved", "metrics", "done"):
        for event in of_type(events, kind):
            if kind == "message_saved" and event["data"]["role"] == "user":
                assert "lane" not in event["data"]
            else:
                assert event["data"]["lane"] in (0, 1, 2), event
    assert sorted(e["data"]["lane"] for e in of_type(events, "done")) == [0, 1, 2]
    assert sorted(e["data"]["lane"] for e in of_type(events, "metrics")) == [0, 1, 2]
    # Each lane was its own request to its own model.
    assert sorted(r.model for r in scripted.requests) == MODELS

    question = of_type(events, "accepted")[0]["data"]["message_id"]
    saved = lane_rows(server, chat["id"], question)
    assert {lane: saved[lane][3] for lane in saved} == {
        lane: ANSWERS[model] for lane, model in enumerate(MODELS)
    }
    # Lane 0 is the version shown; the others are versions beside it.
    assert [(saved[lane][1], saved[lane][2]) for lane in range(3)] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    assert [saved[lane][4]["model"] for lane in range(3)] == MODELS
    # Usage counts every lane: each version carries its own.
    assert [saved[lane][4]["usage"]["output_tokens"] for lane in range(3)] == [7, 7, 7]
    status, usage = api.get("/api/usage?group=chat&period=all")
    [row] = [r for r in usage["rows"] if r["key"] == chat["id"]]
    assert (row["answers"], row["output_tokens"]) == (3, 21), "the usage report counts every lane"
    # The transcript shows lane 0's answer with its ‹ 1/3 › versions.
    history = api.history(chat["id"])
    assert [m["content"] for m in history[-2:]] == ["Who answers?", ANSWERS["model-a"]]


def test_continue_with_a_lane_makes_it_the_answer_the_chat_goes_on_from(
    server, api, scripted, chat, sockets
):
    enqueue_answers(scripted)
    ws = sockets(chat["id"])
    ws.send(type="send", message="Pick one", compare=compare_of(chat))
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    question = of_type(events, "accepted")[0]["data"]["message_id"]
    lane_2 = lane_rows(server, chat["id"], question)[2][0]

    status, body = api.post(f"/api/session/{chat['id']}/messages/{lane_2}/show")
    assert status == 200, body
    # Versions are in the order the lanes' answers were saved.
    ids = body["version"]["ids"]
    assert body["version"] == {"n": ids.index(lane_2) + 1, "m": 3, "ids": ids}
    scripted.enqueue(Scenario().text("Going on from Charlie."))
    ws.send(type="send", message="And then?")
    ws.events_until("turn_end")
    history = api.history(chat["id"])
    assert [m["content"] for m in history[-4:]] == [
        "Pick one",
        ANSWERS["model-c"],
        "And then?",
        "Going on from Charlie.",
    ]
    # The follow-up request carried lane 2's answer as the history.
    sent = scripted.requests[-1].body["messages"]
    assert ANSWERS["model-c"] in json.dumps(sent) and ANSWERS["model-a"] not in json.dumps(sent)


def test_compare_over_sse(server, api, scripted, chat):
    enqueue_answers(scripted)
    stream = SSE(
        server,
        "POST",
        "/api/chat_stream",
        # Routes as the page's form sends them: "endpoint_id:model".
        {
            "session": chat["id"],
            "message": "Over SSE",
            "compare": [f"{chat['endpoint']['id']}:{model}" for model in MODELS],
        },
    )
    try:
        assert stream.response.status == 200
        events = list(stream.events())
    finally:
        stream.close()
    # (A first answer's title may follow the turn's end.)
    assert [e for e in types(events) if e != "title_update"][-1] == "turn_end"
    assert types(events).count("turn_end") == 1
    for lane, model in enumerate(MODELS):
        assert lane_text(events, lane) == ANSWERS[model]
    assert sorted(e["data"]["lane"] for e in of_type(events, "done")) == [0, 1, 2]


def test_stop_one_lane_and_the_others_go_on(server, api, scripted, chat, sockets):
    scripted.enqueue(Scenario().text("Alpha ").stall().text("ends."), model="model-a")
    scripted.enqueue(Scenario().text("Bravo ").stall().text("never seen."), model="model-b")
    scripted.enqueue(Scenario().text("Charlie ").stall().text("ends."), model="model-c")
    ws = sockets(chat["id"])
    ws.send(type="send", message="Stop the middle one", compare=compare_of(chat))
    events = []
    while {e["data"].get("lane") for e in of_type(events, "content")} != {0, 1, 2}:
        events.append(ws.receive(timeout=15))
    ws.send(type="stop", lane=1)
    while not of_type(events, "error"):
        events.append(ws.receive(timeout=15))
    error = of_type(events, "error")[0]["data"]
    assert error == {"code": "cancelled", "message": "Stopped.", "lane": 1}
    scripted.release()  # the other two lanes go on to their ends
    events += ws.events_until("turn_end", timeout=WAIT_SECONDS)
    assert lane_text(events, 0) == "Alpha ends."
    assert lane_text(events, 2) == "Charlie ends."
    assert lane_text(events, 1) == "Bravo "
    assert sorted(e["data"]["lane"] for e in of_type(events, "done")) == [0, 2]
    assert types(events).count("turn_end") == 1
    question = of_type(events, "accepted")[0]["data"]["message_id"]
    saved = lane_rows(server, chat["id"], question)
    assert saved[1][3] == "Bravo " and saved[1][4]["error"]["code"] == "cancelled"
    assert saved[0][3] == "Alpha ends." and "error" not in saved[0][4]


def test_stop_stops_every_lane(server, api, scripted, chat, sockets):
    for model in MODELS:
        scripted.enqueue(Scenario().text(f"{model} ").stall().text("never."), model=model)
    ws = sockets(chat["id"])
    ws.send(type="send", message="Stop them all", compare=compare_of(chat))
    events = []
    while {e["data"].get("lane") for e in of_type(events, "content")} != {0, 1, 2}:
        events.append(ws.receive(timeout=15))
    ws.send(type="stop")
    events += ws.events_until("turn_end", timeout=WAIT_SECONDS)
    errors = of_type(events, "error")
    assert sorted(e["data"]["lane"] for e in errors) == [0, 1, 2]
    assert {e["data"]["code"] for e in errors} == {"cancelled"}
    assert not of_type(events, "done")


def test_one_lane_failing_ends_only_that_lane(server, api, scripted, chat, sockets):
    scripted.enqueue(Scenario().text(ANSWERS["model-a"], chunks=3), model="model-a")
    scripted.enqueue(
        Scenario.http_error(400, "bad_request", message="no such thing"), model="model-b"
    )
    scripted.enqueue(Scenario().text(ANSWERS["model-c"], chunks=3), model="model-c")
    ws = sockets(chat["id"])
    ws.send(type="send", message="One fails", compare=compare_of(chat))
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    errors = of_type(events, "error")
    assert [e["data"]["lane"] for e in errors] == [1]
    assert sorted(e["data"]["lane"] for e in of_type(events, "done")) == [0, 2]
    question = of_type(events, "accepted")[0]["data"]["message_id"]
    saved = lane_rows(server, chat["id"], question)
    assert saved[1][3] == "" and saved[1][4]["error"]["code"] == errors[0]["data"]["code"]
    assert saved[0][3] == ANSWERS["model-a"] and saved[2][3] == ANSWERS["model-c"]


def test_reconnect_mid_stream_restores_every_lane(server, api, scripted, chat, sockets):
    for model, text in ANSWERS.items():
        first, rest = text[:8], text[8:]
        scripted.enqueue(Scenario().text(first).stall().text(rest, chunks=3), model=model)
    first = sockets(chat["id"])
    first.send(type="send", message="Reload me", compare=compare_of(chat))
    seen = []
    while {e["data"].get("lane") for e in of_type(seen, "content")} != {0, 1, 2}:
        seen.append(first.receive(timeout=15))
    first.close()  # the page reloads

    # A fresh page has only the database: it gets a snapshot with every lane so far.
    fresh = sockets(chat["id"])
    fresh.send(type="resume", last_event_id=None)
    snapshot = fresh.receive(timeout=15)
    assert snapshot["type"] == "snapshot", snapshot
    lanes = snapshot["data"]["lanes"]
    assert [(lane["lane"], lane["model"]) for lane in lanes] == list(enumerate(MODELS))
    assert [lane["content"] for lane in lanes] == [ANSWERS[m][:8] for m in MODELS]
    assert not any(lane["finished"] for lane in lanes)

    # A page that reconnects with its last event id gets exactly what it missed.
    again = sockets(chat["id"])
    again.send(type="resume", last_event_id=seen[-1]["event_id"])
    # Its subscription is in place once it answers this (messages are handled in order).
    again.send(type="approve", call_id="nc_nothing", decision="deny")
    replayed = again.events_until("error")
    assert replayed[-1]["data"]["code"] == "no_such_approval"
    scripted.release()
    after_snapshot = fresh.events_until("turn_end", timeout=WAIT_SECONDS)
    missed = replayed[:-1] + again.events_until("turn_end", timeout=WAIT_SECONDS)
    for lane, model in enumerate(MODELS):
        assert lanes[lane]["content"] + lane_text(after_snapshot, lane) == ANSWERS[model]
        assert lane_text(seen, lane) + lane_text(missed, lane) == ANSWERS[model]
    assert sorted(e["data"]["lane"] for e in of_type(after_snapshot, "done")) == [0, 1, 2]


def test_approvals_ask_per_lane_on_their_own_card(server, api, scripted, sockets):
    from turn_support import make_chat

    chat = make_chat(api, scripted, settings={"tools": ["guarded"]})
    for model in MODELS[:2]:
        scripted.enqueue(
            Scenario().tool_call("guarded", {"label": f"from {model}"}),
            Scenario().text(f"{model} used the tool."),
            model=model,
        )
    ws = sockets(chat["id"])
    ws.send(type="send", message="Use the tool", compare=compare_of(chat, MODELS[:2]))
    events = []
    while len(of_type(events, "tool_approval")) < 2:
        events.append(ws.receive(timeout=15))
    cards = {e["data"]["lane"]: e["data"] for e in of_type(events, "tool_approval")}
    assert sorted(cards) == [0, 1] and cards[0]["call_id"] != cards[1]["call_id"]
    ws.send(type="approve", call_id=cards[1]["call_id"], decision="deny")
    ws.send(
        type="approve", call_id=cards[0]["call_id"], decision="approve", digest=cards[0]["digest"]
    )
    events += ws.events_until("turn_end", timeout=WAIT_SECONDS)
    ends = {e["data"]["lane"]: e["data"] for e in of_type(events, "tool_end")}
    assert ends[0]["ok"] is True and ends[1]["ok"] is False
    assert sorted(e["data"]["lane"] for e in of_type(events, "done")) == [0, 1]
    # Lane 1 answered from its own branch: its second request saw its own denied call.
    second = [r for r in scripted.requests if r.model == "model-b"][-1]
    assert "from model-b" in json.dumps(second.body) and "from model-a" not in json.dumps(
        second.body
    )


@pytest.mark.parametrize(
    ("compare", "code"),
    [
        ("empty", "compare_too_few"),
        ("one", "compare_invalid"),
        ("text", "compare_too_few"),
        ("single", "compare_too_few"),
        ("five", "compare_too_many"),
        ("missing", "compare_route_not_found"),
        ("twice", "compare_duplicate_route"),
        ("no-model", "compare_invalid"),
    ],
)
def test_bad_compare_is_refused_and_changes_nothing(
    server, api, scripted, chat, sockets, compare, code
):
    endpoint = chat["endpoint"]["id"]
    value = {
        "empty": [],
        "text": f"{endpoint}:model-a",
        "one": {"endpoint_id": endpoint, "model": "model-a"},
        "single": [{"endpoint_id": endpoint, "model": "model-a"}],
        "five": [{"endpoint_id": endpoint, "model": f"m{i}"} for i in range(5)],
        "missing": [
            {"endpoint_id": endpoint, "model": "model-a"},
            {"endpoint_id": 987654, "model": "model-b"},
        ],
        "twice": [{"endpoint_id": endpoint, "model": "model-a"}] * 2,
        "no-model": [{"endpoint_id": endpoint, "model": "model-a"}, {"endpoint_id": endpoint}],
    }[compare]
    before = rows(server, chat["id"])
    ws = sockets(chat["id"])
    ws.send(type="send", message="Bad compare", compare=value)
    error = ws.events_until("error")[-1]
    assert error["data"]["code"] == code
    status, body = api.post(
        "/api/chat_stream", {"session": chat["id"], "message": "Bad", "compare": value}
    )
    assert body["error"]["code"] == code, body
    assert status == (404 if code == "compare_route_not_found" else 400)
    assert rows(server, chat["id"]) == before
    assert not scripted.requests


def test_compare_on_regenerate_or_edit_says_which(server, api, scripted, chat, sockets):
    scripted.enqueue(Scenario().text("A single answer."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Once", request_id="once-1")
    events = ws.events_until("turn_end")
    question = of_type(events, "accepted")[0]["data"]["message_id"]
    before = rows(server, chat["id"])
    status, body = api.post(f"/api/session/{chat['id']}/regenerate", {"compare": compare_of(chat)})
    assert status == 400 and body["error"]["code"] == "compare_unsupported"
    assert "regenerate" in body["error"]["message"]
    status, body = api.post(
        f"/api/session/{chat['id']}/messages/{question}/edit",
        {"text": "Edited", "compare": compare_of(chat)},
    )
    assert status == 400 and body["error"]["code"] == "compare_unsupported"
    assert "edit" in body["error"]["message"]
    # A resend of the saved question (a retry) with compare is refused the same way.
    ws.send(type="send", message="Once", request_id="once-1", compare=compare_of(chat))
    error = ws.events_until("error")[-1]["data"]
    assert error["code"] == "compare_unsupported"
    assert rows(server, chat["id"]) == before
    assert len(scripted.requests) == 1


def test_stop_names_a_lane_number(server, api, chat, sockets):
    ws = sockets(chat["id"])
    ws.send(type="stop", lane=7)
    assert ws.events_until("error")[-1]["data"]["code"] == "invalid_lane"
    status, body = api.post(f"/api/chat/stop/{chat['id']}", {"lane": 1})
    assert status == 200 and body == {"stopped": False}


def test_lanes_travel_through_export_and_import_as_versions(server, api, scripted, chat, sockets):
    enqueue_answers(scripted)
    ws = sockets(chat["id"])
    ws.send(type="send", message="Export us", compare=compare_of(chat))
    ws.events_until("turn_end", timeout=WAIT_SECONDS)
    status, document = api.get(f"/api/session/{chat['id']}/export?fmt=json")
    assert status == 200, document
    assert sorted(m["content"] for m in document["messages"] if m["role"] == "assistant") == sorted(
        ANSWERS.values()
    )
    copied = api_imported_chat(api, document)
    answers = [r for r in rows(server, copied) if r[1] == "assistant"]
    question = next(r[0] for r in rows(server, copied) if r[1] == "user")
    assert sorted(r[5] for r in answers) == sorted(ANSWERS.values())
    assert {r[2] for r in answers} == {question}, "siblings under the one question"
    assert [r[5] for r in answers if r[3]] == [ANSWERS["model-a"]], "lane 0's is shown"


def test_a_failing_lane_falls_back_on_its_own(server, api, scripted, chat, sockets):
    status, body = api.call(
        "PATCH",
        f"/api/session/{chat['id']}",
        {
            "settings": {
                "fallbacks": [{"endpoint_id": chat["endpoint"]["id"], "model": "backup-model"}]
            }
        },
    )
    assert status == 200, body
    scripted.enqueue(Scenario().text(ANSWERS["model-a"], chunks=3), model="model-a")
    scripted.enqueue(Scenario.http_error(401), model="model-b")
    scripted.enqueue(Scenario().text("The backup answers lane one."), model="backup-model")
    ws = sockets(chat["id"])
    ws.send(type="send", message="Fall back", compare=compare_of(chat, MODELS[:2]))
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    [route] = of_type(events, "model_route")
    assert route["data"]["lane"] == 1 and route["data"]["model"] == "backup-model"
    assert lane_text(events, 0) == ANSWERS["model-a"]
    assert lane_text(events, 1) == "The backup answers lane one."
    assert not of_type(events, "error")
    question = of_type(events, "accepted")[0]["data"]["message_id"]
    saved = lane_rows(server, chat["id"], question)
    assert saved[1][4]["fallback"]["model"] == "backup-model"
    assert "fallback" not in saved[0][4]
    # Lane 0 never called the backup: only lane 1 fell back.
    assert sorted(r.model for r in scripted.requests) == ["backup-model", "model-a", "model-b"]
