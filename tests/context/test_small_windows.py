"""Small local windows and prompt caches (issue 44, items 1 and 4): a chat on
llama-server's `-c 256` keeps answering without ever sending what Numi's own estimate
says will not fit; a question that cannot fit is refused before it is sent; summary
requests stay within the window, in pieces; and the system prompt of a chat is
byte-stable across turns and minutes, so a server's prompt cache keeps its prefix.
The scripted provider answers with llama-server's recorded model list and /props
(numi/testing/recordings.py) and records every request a real SDK sent it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from numi.agent.system_context import system_parts, system_text
from numi.chat.compaction import SUMMARY_SYSTEM, Budget, compact
from numi.chat.context import ChatContextService, estimate_tokens
from numi.chat.token_estimate import text_tokens
from numi.providers import get_adapter
from numi.testing import Scenario
from numi.testing import recordings as rec
from turn_support import make_chat, of_type, turn_server_env, types

from context_support import add, make_user
from context_support import make_chat as make_stored_chat

WINDOW = 256
# About 190 of Numi's tokens: with a question it nearly fills a 256-token window, as a
# system prompt, tools and one question do on a small local model.
LONG_PROMPT = "You answer questions about the garden in short sentences. " * 16


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def llama_server_256(scripted):
    """The scripted provider as `llama-server -c 256`: its list and /props say 256."""
    scripted.models_body = rec.LLAMA_SERVER_MODELS.replace(b'"n_ctx":8192', b'"n_ctx":256')
    scripted.props = rec.LLAMA_SERVER_PROPS.replace(b'"n_ctx":8192', b'"n_ctx":256')


def estimate_of(body: dict) -> int:
    """Numi's own estimate of a Chat Completions request it sent (no tools)."""
    system, *messages = body["messages"]
    assert system["role"] == "system"
    return estimate_tokens(messages, system["content"])


def send(sockets, chat_id: str, text: str, request_id: str) -> list[dict]:
    ws = sockets(chat_id)
    ws.send(type="send", message=text, request_id=request_id)
    return ws.events_until("turn_end")


# --- item 1: small windows --------------------------------------------------------------------


def test_a_chat_on_a_256_token_window_keeps_answering_within_it(server, api, scripted, sockets):
    llama_server_256(scripted)
    chat = make_chat(
        api, scripted, model="llama-tool", settings={"system_prompt": LONG_PROMPT}, name="c256"
    )
    assert chat["endpoint"]["models"] == ["llama-tool"]

    for turn in range(1, 5):
        scripted.enqueue(Scenario().text(f"Answer {turn}: water the roses in the morning."))
        events = send(sockets, chat["id"], f"Question {turn}: when do I water?", f"c256-{turn}")
        assert "error" not in types(events), of_type(events, "error")
        assert "done" in types(events)

    # One request a turn (no retry after a refusal, no summary request that cannot fit),
    # and none that Numi's own estimate puts over the window.
    assert len(scripted.requests) == 4
    estimates = [estimate_of(request.body) for request in scripted.requests]
    assert max(estimates) <= WINDOW, estimates
    # From the second turn on the older turns are left out; the newest question always goes.
    last = scripted.requests[-1].body["messages"]
    assert last[-1]["content"] == "Question 4: when do I water?"
    assert "Question 1" not in json.dumps(last)
    assert of_type(events, "context_trimmed")
    # No summary request fits 256 tokens: the turn trims without announcing a compaction.
    assert "context_compacting" not in types(events)


def test_tools_that_tip_a_request_over_the_window_are_left_out_with_a_notice(
    server, api, scripted, sockets
):
    llama_server_256(scripted)  # its template takes tools
    settings = {"system_prompt": LONG_PROMPT, "tools": ["echo"]}
    chat = make_chat(api, scripted, model="llama-tool", settings=settings, name="c256")
    scripted.enqueue(Scenario().text("Morning."))

    events = send(sockets, chat["id"], "Question: when do I water?", "c256-tools")

    (notice,) = of_type(events, "tools_omitted")
    assert notice["data"]["source"] == "window"
    assert "would not fit llama-tool's context window" in notice["data"]["message"]
    (request,) = scripted.requests
    assert "tools" not in request.body and estimate_of(request.body) <= WINDOW
    assert api.history(chat["id"])[-1]["meta"]["metrics"]["tools_omitted"] == "window"


def test_a_question_that_cannot_fit_is_refused_before_it_is_sent(server, api, scripted, sockets):
    llama_server_256(scripted)
    chat = make_chat(
        api, scripted, model="llama-tool", settings={"system_prompt": LONG_PROMPT}, name="c256"
    )
    scripted.enqueue(Scenario().text("Never asked."))

    events = send(sockets, chat["id"], "Tell me about tulips. " * 20, "c256-long")

    (error,) = of_type(events, "error")
    assert error["data"]["code"] == "context_budget"
    assert "256" in error["data"]["message"] and "llama-tool" in error["data"]["message"]
    assert scripted.requests == []  # nothing sent, not even once


def test_summary_requests_fit_the_budget_in_pieces(sqlite_app, scripted):
    app = sqlite_app  # the backend plays no part in what is summarised
    with app.app_context():
        user_id = make_user("pieces")
        chat_id = make_stored_chat(user_id)
        for n in range(8):
            add(chat_id, "user", f"Question {n} about the roses and the soil. " * 3)
            add(chat_id, "assistant", f"Answer {n}: compost, water and sunlight. " * 3)
        scripted.enqueue(*[Scenario().text(f"Summary {n}.") for n in range(1, 9)])
        adapter = get_adapter("openai_chat", scripted.openai_base_url, None)
        budget = Budget(300)
        service = ChatContextService(chat_id, user_id, max_messages=200, max_chars=400_000)
        try:
            summary = compact(service, adapter, "llama-tool", app.config, budget=budget).summary
        finally:
            adapter.close()

    pieces = [request.body["messages"] for request in scripted.requests]
    assert len(pieces) > 1  # one request would not have fitted
    for messages in pieces:
        system, question = messages
        assert system["content"] == SUMMARY_SYSTEM
        assert text_tokens(SUMMARY_SYSTEM) + text_tokens(question["content"]) <= 300
    # Each piece after the first carries the summary so far; the last one is kept.
    assert "Summary 1." in pieces[1][1]["content"]
    assert "Question 0" in pieces[0][1]["content"] and "Question 5" in pieces[-1][1]["content"]
    assert summary == f"Summary {len(pieces)}."


# --- item 4: a byte-stable prefix -------------------------------------------------------------


def test_the_system_prompt_says_the_date_not_the_minute(sqlite_app):
    with sqlite_app.app_context():
        user_id = make_user("clock")
        chat_id = make_stored_chat(user_id)
        noon = datetime(2026, 12, 6, 12, 0, 59, tzinfo=UTC)

        def text(at: datetime) -> str:
            return system_text(system_parts(user_id=user_id, chat_id=chat_id, settings={}, now=at))

        assert text(noon) == text(noon + timedelta(seconds=1)) == text(noon + timedelta(hours=11))
        assert "Sunday, 2026-12-06" in text(noon)
        assert text(noon + timedelta(days=1)) != text(noon)  # the date still changes


def test_each_request_starts_with_the_last_one_byte_for_byte(server, api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"system_prompt": "Be brief."}, name="prefix")

    for turn in range(1, 4):
        scripted.enqueue(Scenario().text(f"Answer {turn}."))
        send(sockets, chat["id"], f"Question {turn}?", f"prefix-{turn}")

    sent = [json.dumps(request.body["messages"]) for request in scripted.requests]
    for earlier, later in zip(sent, sent[1:]):
        assert later.startswith(earlier[:-1])  # the whole earlier request, then more
    assert "Current date for the user" in scripted.requests[0].body["messages"][0]["content"]
