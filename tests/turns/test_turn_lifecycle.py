"""The seed's message lifecycle, end to end: a live server, the scripted provider speaking
the real wire protocols through the real SDKs, and a real WebSocket client (JSON view)."""

from __future__ import annotations


from numi.testing import Scenario

from turn_support import db_rows, make_chat, of_type, types
from server_wait import WAIT_SECONDS


def test_plain_answer_is_saved_at_the_boundaries(server, api, scripted, chat, sockets):
    scripted.enqueue(Scenario().text("Hello there, friend.", chunks=5).usage(12, 5))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Say hello", request_id="req-1")
    events = ws.events_until("turn_end")

    names = types(events)
    assert names[0] == "turn_start"
    assert (
        names.index("accepted")
        < names.index("content")
        < names.index("done")
        < names.index("turn_end")
    )
    assert names[-1] == "turn_end"
    ids = [e["event_id"] for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "event ids increase by one"
    assert len({e["turn_id"] for e in events}) == 1
    assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == "Hello there, friend."

    accepted = of_type(events, "accepted")[0]["data"]
    done = of_type(events, "done")[0]["data"]
    messages = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Say hello"),
        ("assistant", "Hello there, friend."),
    ]
    assert messages[0]["id"] == accepted["message_id"] and accepted["request_id"] == "req-1"
    assert messages[1]["id"] == done["message_id"]
    metrics = of_type(events, "metrics")[0]["data"]
    assert metrics["message_id"] == done["message_id"]
    assert metrics["input_tokens"] == 12 and metrics["output_tokens"] == 5
    assert metrics["ttft_ms"] is not None and metrics["duration_ms"] >= metrics["ttft_ms"]
    assert messages[1]["meta"]["metrics"]["output_tokens"] == 5
    assert messages[1]["meta"]["model"] == "fake-model"
    # What went to the provider: the system context, then the question.
    body = scripted.requests[-1].body
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "Say hello"}


def test_messages_of_every_frame_length_arrive_whole(api, scripted, chat, sockets):
    # The server frames its WebSocket messages itself (numi/web/live/ws.py): a payload's length
    # takes 7 bits, 16 bits or 64 bits of the header, by size. One chunk each, so each is
    # one event: short, medium (> 125 bytes) and long (> 65,535 bytes, non-ASCII too).
    parts = ["Short. ", "é" * 300 + " ", "Long: " + "ab😀 " * 20_000]
    scripted.enqueue(Scenario().text(parts[0]).text(parts[1]).text(parts[2]))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Three sizes")
    events = ws.events_until("turn_end")
    assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == "".join(parts)
    assert max(len(raw.encode()) for raw in ws.frames) > 65_535
    assert api.history(chat["id"])[-1]["content"] == "".join(parts)


def test_reasoning_streams_and_is_saved_apart_from_the_answer(api, scripted, chat, sockets):
    scripted.enqueue(
        Scenario().reasoning("First, think. Then answer.", chunks=3).text("42", chunks=1)
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="What is the answer?")
    events = ws.events_until("turn_end")
    reasoning = "".join(e["data"]["delta"] for e in of_type(events, "reasoning"))
    assert reasoning == "First, think. Then answer."
    assert types(events).index("reasoning") < types(events).index("content")
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "42"
    assert answer["reasoning_content"] == "First, think. Then answer."


def test_parallel_tool_calls_report_in_completion_order_and_save_in_call_order(
    api, scripted, sockets
):
    chat = make_chat(api, scripted, settings={"tools": ["sleepy"]})
    scripted.enqueue(
        Scenario()
        .tool_call("sleepy", {"seconds": 0.6, "label": "slow"}, fragments=3)
        .tool_call("sleepy", {"seconds": 0.05, "label": "fast"}, fragments=2)
    )
    scripted.enqueue(Scenario().text("Both done.", chunks=2))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Run two tools")
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)

    preparing = [e["data"]["call_id"] for e in of_type(events, "tool_preparing")]
    assert len(preparing) == 2
    first_call, second_call = preparing
    ends = [e["data"] for e in of_type(events, "tool_end")]
    assert [e["call_id"] for e in ends] == [second_call, first_call], "UI order is completion order"
    assert all(e["ok"] for e in ends)
    assert ends[1]["duration_ms"] >= 500

    messages = api.history(chat["id"])
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    call_message = messages[1]
    assert [c["id"] for c in call_message["tool_calls"]] == [first_call, second_call]
    assert [m["tool_call_id"] for m in messages[2:4]] == [first_call, second_call], (
        "database order is call order"
    )
    assert "slow" in messages[2]["content"] and "fast" in messages[3]["content"]
    # The step with the calls was saved before its tools ran.
    saved = of_type(events, "message_saved")
    call_saved = next(e for e in saved if e["data"]["message_id"] == call_message["id"])
    first_start = of_type(events, "tool_start")[0]
    assert call_saved["event_id"] < first_start["event_id"]

    # The next request carries the calls and their results, paired by the provider's own ids.
    follow_up = scripted.requests[-1].body["messages"]
    assistant = next(m for m in follow_up if m.get("tool_calls"))
    results = [m for m in follow_up if m["role"] == "tool"]
    assert (
        [c["id"] for c in assistant["tool_calls"]]
        == [r["tool_call_id"] for r in results]
        == ["call_1", "call_2"]
    )
    assert of_type(events, "done")[0]["data"]["message_id"] == messages[-1]["id"]


def test_tool_errors_are_results_the_model_reads(api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"tools": ["broken", "slow_timeout"]})
    scripted.enqueue(
        Scenario()
        .tool_call("broken", {})
        .tool_call("slow_timeout", {"seconds": 5})
        .tool_call("not_a_tool", {})
    )
    scripted.enqueue(Scenario().text("Sorry, the tools failed."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Use the tools")
    events = ws.events_until("turn_end")
    ends = {e["data"]["name"]: e["data"] for e in of_type(events, "tool_end")}
    assert not any(e["ok"] for e in ends.values())
    assert "broke on purpose" in ends["broken"]["result"]
    assert "timed out" in ends["slow_timeout"]["result"]
    assert "no tool named" in ends["not_a_tool"]["result"]
    assert "done" in types(events), "a failing tool does not end the turn"
    results = [m for m in scripted.requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and "broke on purpose" in results[0]["content"]


def test_invalid_tool_arguments_become_a_tool_error(api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"tools": ["echo"]})
    scripted.enqueue(Scenario().tool_call("echo", '{"broken": ', fragments=2))
    scripted.enqueue(Scenario().text("I will fix the arguments."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Echo please")
    events = ws.events_until("turn_end")
    end = of_type(events, "tool_end")[0]["data"]
    assert not end["ok"] and "not valid JSON" in end["result"]
    assert "done" in types(events)


def test_step_limit_ends_a_runaway_loop(live_server_factory, scripted, channel_env):
    from turn_support import Api, Socket, turn_server_env

    server = live_server_factory(**turn_server_env(NUMI_MAX_STEPS=2, **channel_env))
    api = Api(server.url)
    chat = make_chat(api, scripted, settings={"tools": ["echo"]})
    for _ in range(3):
        scripted.enqueue(Scenario().tool_call("echo", {"again": True}))
    ws = Socket(server, chat["id"])
    try:
        ws.send(type="send", message="Loop forever")
        events = ws.events_until("turn_end")
    finally:
        ws.close()
    errors = of_type(events, "error")
    assert errors and errors[0]["data"]["code"] == "step_limit"
    assert "done" not in types(events)
    assert len(scripted.requests) == 2


def test_retry_with_the_same_request_id_does_not_duplicate(api, scripted, chat, sockets):
    scripted.enqueue(Scenario().text("Only once."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Once", request_id="same-id")
    first = ws.events_until("turn_end")
    ws.send(type="send", message="Once", request_id="same-id")
    second = ws.events_until("turn_end")

    assert (
        of_type(second, "accepted")[0]["data"]["message_id"]
        == of_type(first, "accepted")[0]["data"]["message_id"]
    )
    assert (
        of_type(second, "done")[0]["data"]["message_id"]
        == of_type(first, "done")[0]["data"]["message_id"]
    )
    assert len(scripted.requests) == 1, "no second model call for a finished request"
    assert [m["role"] for m in api.history(chat["id"])] == ["user", "assistant"]


def test_a_failed_request_is_answered_when_retried(api, scripted, chat, sockets):
    scripted.enqueue(Scenario.http_error(500))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Try me", request_id="flaky")
    failed = ws.events_until("turn_end")
    assert of_type(failed, "error")[0]["data"]["code"] == "provider_unavailable"
    scripted.enqueue(Scenario().text("Second time lucky."))
    ws.send(type="send", message="Try me", request_id="flaky")
    retried = ws.events_until("turn_end")
    assert "done" in types(retried)
    messages = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Try me"),
        ("assistant", "Second time lucky."),
    ]
    # The failure stays as the answer's previous version, with its code (issue 25, item 6),
    # and is never sent to the model.
    failed_id = messages[1]["version"]["ids"][0]
    status, switched = api.post(f"/api/session/{chat['id']}/messages/{failed_id}/show")
    assert status == 200 and switched["version"]["n"] == 1
    failed = api.history(chat["id"])[1]
    assert failed["meta"]["error"]["code"] == "provider_unavailable" and failed["meta"]["partial"]
    assert [m["role"] for m in scripted.requests[-1].body["messages"]] == ["system", "user"]


def test_failure_before_output_falls_back_to_the_next_model(api, scripted, sockets):
    chat = make_chat(api, scripted, model="primary-model")
    status, _ = api.call(
        "PATCH",
        f"/api/session/{chat['id']}",
        {
            "settings": {
                "fallbacks": [{"endpoint_id": chat["endpoint"]["id"], "model": "backup-model"}]
            }
        },
    )
    assert status == 200
    scripted.enqueue(Scenario.http_error(429, retry_after=0), model="primary-model")
    scripted.enqueue(Scenario().text("From the backup."), model="backup-model")
    ws = sockets(chat["id"])
    ws.send(type="send", message="Hello")
    events = ws.events_until("turn_end")
    route = of_type(events, "model_route")[0]["data"]
    assert route["model"] == "backup-model" and route["reason"] == "rate_limited"
    assert "error" not in types(events)
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "From the backup." and answer["meta"]["model"] == "backup-model"


def test_failure_after_output_keeps_the_partial_answer_and_never_falls_back(api, scripted, sockets):
    chat = make_chat(api, scripted, model="primary-model")
    api.call(
        "PATCH",
        f"/api/session/{chat['id']}",
        {
            "settings": {
                "fallbacks": [{"endpoint_id": chat["endpoint"]["id"], "model": "backup-model"}]
            }
        },
    )
    scripted.enqueue(Scenario().text("Half an ans", chunks=2).drop(), model="primary-model")
    ws = sockets(chat["id"])
    ws.send(type="send", message="Hello")
    events = ws.events_until("turn_end")
    assert "model_route" not in types(events)
    error = of_type(events, "error")[0]["data"]
    assert error["code"] == "stream_interrupted"
    answer = api.history(chat["id"])[-1]
    assert answer["role"] == "assistant" and answer["content"] == "Half an ans"
    assert answer["meta"]["error"]["code"] == "stream_interrupted"
    assert all(r.model == "primary-model" for r in scripted.requests)


def test_an_empty_model_is_repaired_before_the_call(api, scripted, sockets):
    # An endpoint of its own: the repair takes the endpoint's default model, and the shared
    # one's is the model of whichever test made it first (primary-model when a run selected
    # the fallback test before this one).
    chat = make_chat(api, scripted, name="scripted-repair")
    api.call("PATCH", f"/api/session/{chat['id']}", {"model": ""})
    scripted.enqueue(Scenario().text("Repaired."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="Hello")
    events = ws.events_until("turn_end")
    assert of_type(events, "model_route")[0]["data"]["reason"] == "repaired"
    assert "done" in types(events)
    status, stored = api.get(f"/api/session/{chat['id']}")
    assert stored["model"] == "fake-model"


def test_chat_deleted_mid_turn_ends_cleanly_and_recreates_nothing(
    server, api, scripted, chat, sockets
):
    scripted.enqueue(
        Scenario()
        .text("This will never be saved because the chat goes away", chunks=20)
        .delay(0.05)
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="Long answer please")
    ws.events_until("content")
    status, _ = api.call("DELETE", f"/api/session/{chat['id']}")
    assert status == 409, "deleting a chat with a running turn is refused"
    # Delete behind the API's back, as another process would.
    db_rows(server, "UPDATE chats SET deleted_at = CURRENT_TIMESTAMP WHERE id = ?", chat["id"])
    events = ws.events_until("turn_end")
    assert of_type(events, "error")[0]["data"]["code"] == "chat_deleted"
    roles = [
        r[0]
        for r in db_rows(
            server, "SELECT role FROM messages WHERE chat_id = ? ORDER BY id", chat["id"]
        )
    ]
    assert roles == ["user"]
    assert db_rows(server, "SELECT deleted_at IS NOT NULL FROM chats WHERE id = ?", chat["id"]) == [
        (1,)
    ]


def test_title_update_follows_the_first_answer(live_server_factory, scripted, channel_env):
    from turn_support import Api, Socket, turn_server_env

    server = live_server_factory(**turn_server_env(NUMI_GENERATE_TITLES=1, **channel_env))
    api = Api(server.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Paris is the capital."))
    scripted.enqueue(Scenario().text('"Capital of France"'))
    ws = Socket(server, chat["id"])
    try:
        ws.send(type="send", message="What is the capital of France?")
        ws.events_until("turn_end")
        title = ws.events_until("title_update")[-1]["data"]["title"]
    finally:
        ws.close()
    assert title == "Capital of France"
    assert api.get(f"/api/session/{chat['id']}")[1]["title"] == "Capital of France"
    prompt = scripted.requests[-1].body["messages"][-1]["content"]
    assert "What is the capital of France?" in prompt


def test_without_model_titles_the_chat_is_named_after_its_first_question(
    live_server_factory, scripted
):
    """The first question's first words, also when its own turn failed (the title then
    follows the first answered turn, and still names the first question)."""
    from turn_support import Api, Socket, turn_server_env

    server = live_server_factory(**turn_server_env(NUMI_GENERATE_TITLES=0))
    api = Api(server.url)
    first, failed = make_chat(api, scripted), make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Paris."))
    scripted.enqueue(Scenario.http_error(400))
    scripted.enqueue(Scenario().text("Lyon."))
    for chat, questions in ((first, ["Capital of France?"]), (failed, ["Broken one?", "Lyon?"])):
        ws = Socket(server, chat["id"])
        try:
            for question in questions:
                ws.send(type="send", message=question)
                ws.events_until("turn_end")
            title = ws.events_until("title_update")[-1]["data"]["title"]
        finally:
            ws.close()
        assert title == questions[0]
        assert api.get(f"/api/session/{chat['id']}")[1]["title"] == questions[0]
