"""The next request laid open: /context's parts and numbers, messages left out of the
context (never sent on any protocol, tool groups whole), and estimates that count the
tools block and learn from what the server reports. A live server, the scripted provider
(which counts prompt tokens with its own tokenizer, numi.testing.tokens) through the real
SDKs, real WebSocket clients."""

from __future__ import annotations

import json

import pytest

from numi.testing import Scenario
from turn_support import make_chat, of_type
from server_wait import WAIT_SECONDS

PROTOCOLS = ["openai_chat", "openai_responses", "anthropic"]


def sent(request) -> str:
    """Everything a request carried, as text."""
    return json.dumps(request.body)


def turn(sockets, chat_id: str, message: str) -> list[dict]:
    ws = sockets(chat_id)
    ws.send(type="send", message=message)
    events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    assert of_type(events, "done"), events
    return events


def set_in_context(api, chat_id: str, message_id: int, value) -> tuple[int, dict]:
    return api.call("PATCH", f"/api/session/{chat_id}/messages/{message_id}", {"in_context": value})


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_left_out_message_reaches_no_protocol_until_brought_back(api, scripted, sockets, kind):
    chat = make_chat(api, scripted, kind=kind)
    scripted.enqueue(Scenario().text("Noted."), Scenario().text("Noted too."))
    turn(sockets, chat["id"], "remember the walrus")
    turn(sockets, chat["id"], "and the carpenter")
    question = next(m for m in api.history(chat["id"]) if m["content"] == "remember the walrus")
    status, body = set_in_context(api, chat["id"], question["id"], False)
    assert status == 200 and body["changed"] == [question["id"]]

    turn(sockets, chat["id"], "what now?")
    text = sent(scripted.requests[-1])
    assert "walrus" not in text and "carpenter" in text and "what now?" in text
    # Its answer stays, after a placeholder question (every protocol wants a user first).
    assert "Noted." in text and "left out of the context by the user" in text
    # The transcript keeps it, marked.
    history = api.history(chat["id"])
    marked = {m["id"]: m["in_context"] for m in history}
    assert marked[question["id"]] is False
    assert sum(1 for value in marked.values() if value is False) == 1
    status, context = api.get(f"/api/session/{chat['id']}/context")
    history_part = next(p for p in context["parts"] if p["kind"] == "history")
    assert history_part["left_out"] == 1
    assert [m["id"] for m in history_part["left_out_messages"]] == [question["id"]]
    assert question["id"] not in [m["id"] for m in history_part["messages"]]

    assert set_in_context(api, chat["id"], question["id"], True)[0] == 200
    turn(sockets, chat["id"], "and again?")
    assert "walrus" in sent(scripted.requests[-1])
    assert all(m["in_context"] for m in api.history(chat["id"]))


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_tool_step_leaves_with_its_results(api, scripted, sockets, kind):
    chat = make_chat(api, scripted, kind=kind, settings={"tools": ["echo"]})
    scripted.enqueue(
        Scenario().tool_call("echo", {"word": "plankton"}, id="call_a"),
        Scenario().text("The echo said plankton."),
    )
    turn(sockets, chat["id"], "use the echo tool")
    history = api.history(chat["id"])
    step = next(m for m in history if m["role"] == "assistant" and m["tool_calls"])
    result = next(m for m in history if m["role"] == "tool")
    # Leaving out the result takes its call with it (and the other way round).
    status, body = set_in_context(api, chat["id"], result["id"], False)
    assert status == 200 and sorted(body["changed"]) == sorted([step["id"], result["id"]])
    turn(sockets, chat["id"], "and now?")
    text = sent(scripted.requests[-1])
    assert "plankton" not in text.replace("The echo said plankton.", "")
    assert "call_a" not in text and step["tool_calls"][0]["id"] not in text
    assert "use the echo tool" in text and "The echo said plankton." in text
    assert set_in_context(api, chat["id"], step["id"], True)[1]["changed"] == [
        step["id"],
        result["id"],
    ]
    turn(sockets, chat["id"], "once more")
    assert '"word": "plankton"' in sent(scripted.requests[-1]).replace('\\"', '"')


def test_leaving_out_refuses_bad_input_and_foreign_messages(api, scripted, sockets, server):
    chat = make_chat(api, scripted)
    other = make_chat(api, scripted)
    turn(sockets, chat["id"], "mine")
    turn(sockets, other["id"], "theirs")
    mine = api.history(chat["id"])[0]
    theirs = api.history(other["id"])[0]
    for body, code in (({"in_context": "no"}, "invalid_in_context"), ({}, "invalid_in_context")):
        status, answer = api.call("PATCH", f"/api/session/{chat['id']}/messages/{mine['id']}", body)
        assert (status, answer["error"]["code"]) == (400, code)
    status, answer = set_in_context(api, chat["id"], theirs["id"], False)
    assert status == 404
    assert all(m["in_context"] for m in api.history(chat["id"]) + api.history(other["id"]))
    status, answer = api.get(f"/api/session/{chat['id']}/context?kinds=history,nonsense")
    assert (status, answer["error"]["code"]) == (400, "unknown_part_kind")


def test_context_lays_the_request_open_part_by_part(api, scripted, sockets):
    chat = make_chat(
        api, scripted, settings={"system_prompt": "You are terse.", "tools": ["echo", "sleepy"]}
    )
    turn(sockets, chat["id"], "hello there")
    status, context = api.get(f"/api/session/{chat['id']}/context")
    assert status == 200
    kinds = [p["kind"] for p in context["parts"]]
    assert kinds == [
        "system_prompt",
        "project_instructions",
        "memories",
        "summary",
        "history",
        "attachments",
        "tools",
    ]
    parts = {p["kind"]: p for p in context["parts"]}
    assert parts["system_prompt"]["text"].startswith("You are terse.")
    assert "Current date for the user" in parts["system_prompt"]["text"]
    assert parts["history"]["included"] == 2 and parts["history"]["omitted"] == 0
    assert [t["name"] for t in parts["tools"]["items"]] == ["echo", "sleepy"]
    assert parts["tools"]["tokens"] > 0 and '"sleepy"' in parts["tools"]["text"]
    assert context["estimated_tokens"] >= sum(p["tokens"] for p in context["parts"]) - 8
    assert context["context_window"] == 32768 and context["estimated_cost"] is None
    only = api.get(f"/api/session/{chat['id']}/context?kinds=tools")[1]["parts"]
    assert [p["kind"] for p in only] == ["tools"]
    # With a price, the estimate has a cost (input only).
    status, _ = api.post(
        "/api/usage/prices", {"model": "fake-model", "input_per_mtok": 2.0, "output_per_mtok": 8.0}
    )
    assert status in (200, 201)
    context = api.get(f"/api/session/{chat['id']}/context")[1]
    assert context["estimated_cost"] == pytest.approx(context["estimated_tokens"] * 2.0 / 1e6)


def test_estimates_match_the_servers_count(api, scripted, sockets):
    """Characters alone: within 25 % of the server's count; calibrated on the model's own
    reports: within 10 %, and the tools block counts in both."""
    chat = make_chat(
        api,
        scripted,
        settings={
            "system_prompt": "Answer in the voice of a patient librarian who loves maps.",
            "tools": ["echo", "sleepy", "broken"],
        },
    )
    prose = (
        "Tell me about the old harbour, the lighthouse keeper and the ships that came in "
        "from the north every spring, carrying timber, salt fish and letters from home."
    )
    estimates, reported = [], []
    for n in range(4):
        context = api.get(f"/api/session/{chat['id']}/context")[1]
        scripted.enqueue(Scenario().text(f"Answer {n}: " + prose[: 60 + 20 * n]).usage(None, 30))
        turn(sockets, chat["id"], prose[: 40 + 30 * n])
        estimates.append((context["estimated_tokens"], context["estimate"]["source"]))
        reported.append(api.history(chat["id"])[-1]["meta"]["usage"]["input_tokens"])
    # The next request adds the question typed after the estimate: count it on both sides.
    first, source = estimates[0]
    assert source == "characters"
    assert abs(first - reported[0]) / reported[0] <= 0.25, (first, reported[0])
    for (estimate, source), count in zip(estimates[1:], reported[1:], strict=True):
        assert source == "reported"
        assert abs(estimate - count) / count <= 0.10, (estimate, count)
    # Without its tools block the estimate would be far off: the tools are counted.
    tools = next(p for p in context["parts"] if p["kind"] == "tools")
    assert tools["tokens"] > 0.2 * estimates[-1][0]


def test_an_overflow_with_the_servers_numbers_sizes_the_retry_and_the_gauge(api, scripted, sockets):
    """llama-server's refusal names its count and its window: the retry fits that window,
    and the gauge stops believing the listed window."""
    chat = make_chat(api, scripted, settings={"auto_compact": False})
    for n in range(3):
        turn(sockets, chat["id"], f"question {n} " + "about the sea and its many ships " * 8)
    info = api.get(f"/api/session/{chat['id']}/context_info")[1]
    assert info["fraction"] < 0.05  # the window assumed: 32,768
    overflow = {
        "error": {
            "code": 400,
            "message": "request (600 tokens) exceeds the available context size (256 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 600,
            "n_ctx": 256,
        }
    }
    scripted.enqueue(
        Scenario.http_error(400, body=overflow), Scenario().text("Short now.").usage(None, 3)
    )
    events = turn(sockets, chat["id"], "one more")
    retry = of_type(events, "context_retry")
    assert retry and of_type(events, "context_trimmed")
    first, second = scripted.requests[-2], scripted.requests[-1]
    assert len(second.body["messages"]) < len(first.body["messages"])
    answer = api.history(chat["id"])[-1]
    assert answer["meta"]["overflow"]["context_window"] == 256
    # The retry was sized to the server's window (its own count of what it received).
    assert answer["meta"]["usage"]["input_tokens"] <= 256
    info = api.get(f"/api/session/{chat['id']}/context_info")[1]
    assert info["context_window"] == 256 and info["window_assumed"] is False
    assert info["fraction"] > 0.65, "the gauge must not claim room the server refused"
