"""Retry replaces the failure (issue 25, item 6): a retry's answer is the failed answer's next
version, not an answer below it; a Retry drawn after an older message cannot answer a newer
question (`retry_stale`). Live server, scripted provider through the real SDKs, real
WebSocket clients."""

from __future__ import annotations

from numi.testing import Scenario

from turn_support import make_chat, of_type, page_retry, types


def _fail(api, scripted, sockets, chat, message, request_id, *scenarios):
    """Send `message`; the scripted answers are `scenarios` (the last one fails)."""
    for scenario in scenarios:
        scripted.enqueue(scenario)
    ws = sockets(chat["id"])
    ws.send(type="send", message=message, request_id=request_id)
    events = ws.events_until("turn_end")
    assert "error" in types(events)
    return ws, api.history(chat["id"])[-1]


def _retry(api, chat_id, message_id):
    return api.post(f"/api/session/{chat_id}/retry", {"message_id": message_id})


def test_a_retry_answer_is_the_next_version_of_the_failed_answer(api, scripted, chat, sockets):
    ws, failed = _fail(api, scripted, sockets, chat, "Try me", "r-1", Scenario.http_error(500))
    assert failed["meta"]["error"]["code"] == "provider_unavailable"

    scripted.enqueue(Scenario().text("Second time lucky."))
    status, body = _retry(api, chat["id"], failed["id"])
    assert status == 202, body
    events = ws.events_until("turn_end")
    assert "done" in types(events) and "error" not in types(events)

    shown = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in shown] == [
        ("user", "Try me"),
        ("assistant", "Second time lucky."),
    ]
    answer = shown[1]
    assert answer["parent_id"] == shown[0]["id"] == failed["parent_id"]
    assert answer["version"] == {"n": 2, "m": 2, "ids": [failed["id"], answer["id"]]}
    # The failure stays reachable as version 1, with its error, and is never sent.
    status, switched = api.post(f"/api/session/{chat['id']}/messages/{failed['id']}/show")
    assert status == 200 and switched["version"]["n"] == 1
    assert api.history(chat["id"])[-1]["meta"]["error"]["code"] == "provider_unavailable"
    assert [m["role"] for m in scripted.requests[-1].body["messages"]] == ["system", "user"]


def test_a_partial_answer_that_failed_is_kept_as_the_previous_version(api, scripted, chat, sockets):
    ws, failed = _fail(
        api,
        scripted,
        sockets,
        chat,
        "Tell me",
        "r-partial",
        Scenario().text("Half an ans", chunks=2).error_event("overloaded"),
    )
    assert failed["content"] == "Half an ans" and failed["meta"]["partial"]
    scripted.enqueue(Scenario().text("A whole answer."))
    status, _ = _retry(api, chat["id"], failed["id"])
    assert status == 202
    ws.events_until("turn_end")
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "A whole answer."
    assert answer["version"]["ids"] == [failed["id"], answer["id"]]


def test_a_retry_after_a_tool_step_replaces_only_the_failed_answer(api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"tools": ["echo"]})
    ws, failed = _fail(
        api,
        scripted,
        sockets,
        chat,
        "Use a tool",
        "r-tool",
        Scenario().tool_call("echo", {"x": 1}),
        Scenario.http_error(500),
    )
    scripted.enqueue(Scenario().text("The final answer."))
    status, _ = _retry(api, chat["id"], failed["id"])
    assert status == 202
    ws.events_until("turn_end")
    shown = api.history(chat["id"])
    assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant"]
    answer = shown[-1]
    assert answer["content"] == "The final answer."
    assert answer["parent_id"] == shown[2]["id"] == failed["parent_id"]
    assert answer["version"]["ids"] == [failed["id"], answer["id"]]
    # The model saw the tool step and its result again, not the failure.
    assert [m["role"] for m in scripted.requests[-1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


def test_a_resent_request_after_a_failure_answers_as_the_next_version(api, scripted, chat, sockets):
    ws, failed = _fail(api, scripted, sockets, chat, "Again?", "r-resend", Scenario.http_error(500))
    scripted.enqueue(Scenario().text("Answered on resend."))
    ws.send(type="send", message="Again?", request_id="r-resend")
    retried = ws.events_until("turn_end")
    answer_id = of_type(retried, "done")[0]["data"]["message_id"]
    shown = api.history(chat["id"])
    assert [m["id"] for m in shown] == [failed["parent_id"], answer_id]
    assert shown[1]["version"]["ids"] == [failed["id"], answer_id]


def test_a_retry_drawn_before_its_failure_was_saved_answers_it(api, scripted, chat, sockets):
    # The page draws a turn's error (and its Retry) as the event arrives; the failed answer's
    # save can land a moment later, so that Retry names the question, not the failure.
    ws, failed = _fail(api, scripted, sockets, chat, "Try me", "r-early", Scenario.http_error(500))
    question = failed["parent_id"]
    scripted.enqueue(Scenario().text("Second time lucky."))
    status, body = _retry(api, chat["id"], question)
    assert status == 202, body
    assert "done" in types(ws.events_until("turn_end"))
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "Second time lucky."
    assert answer["version"]["ids"] == [failed["id"], answer["id"]]
    # Once answered, the same early Retry is stale like any other.
    status, body = _retry(api, chat["id"], question)
    assert status == 409 and body["error"]["code"] == "retry_stale"


def test_an_old_retry_cannot_answer_a_newer_question(api, scripted, chat, sockets):
    ws, failed = _fail(api, scripted, sockets, chat, "First", "r-old", Scenario.http_error(500))
    scripted.enqueue(Scenario().text("The second answer."))
    ws.send(type="send", message="Second", request_id="r-new")
    assert "done" in types(ws.events_until("turn_end"))
    before = api.history(chat["id"])
    asked = len(scripted.requests)

    status, body = _retry(api, chat["id"], failed["id"])
    assert status == 409 and body["error"]["code"] == "retry_stale"
    # Through the page too (an HTMX Retry left on the page), and on an answered question.
    status, html = page_retry(api, chat["id"], failed["id"])
    assert status == 409 and 'data-code="retry_stale"' in html
    status, body = _retry(api, chat["id"], before[-1]["id"])
    assert status == 409 and body["error"]["code"] == "retry_stale"
    status, body = _retry(api, chat["id"], None)
    assert status == 400 and body["error"]["code"] == "invalid_input"
    assert api.history(chat["id"]) == before
    assert len(scripted.requests) == asked, "no model call for a refused Retry"


def test_a_retry_that_fails_before_saving_offers_a_retry_that_works(api, scripted, sockets):
    """The retry's turn set the failed answer aside, then failed before saving anything (the
    endpoints were deleted meanwhile): its Retry names the question, now the chat's end."""
    chat = make_chat(api, scripted, name="retry-doomed-endpoint")
    ws, failed = _fail(
        api, scripted, sockets, chat, "Once more", "r-gone", Scenario.http_error(500)
    )
    # Every endpoint goes (the chat's route would move to another one that remained).
    for endpoint in api.get("/api/endpoints")[1]["endpoints"]:
        status, _ = api.call("DELETE", f"/api/endpoints/{endpoint['id']}")
        assert status in (200, 204)
    page = sockets(chat["id"], html=True)
    page.send(type="resume", last_message_id=failed["id"])
    status, _ = _retry(api, chat["id"], failed["id"])
    assert status == 202
    frame = ""
    while 'data-code="no_model"' not in frame:
        frame = page.receive()
    question_id = failed["parent_id"]
    assert f'"message_id": {question_id}' in frame.replace("&#34;", '"')
    ws.events_until("turn_end")
    status, body = _retry(api, chat["id"], question_id)
    assert status == 202, body  # accepted (its turn fails again: the chat still has no model)
