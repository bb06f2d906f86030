"""Reasoning replay rules of prepare_messages(), each checked on the request the scripted
provider recorded: a first step streams reasoning and tool calls, the agent-like helper
stores the assistant message, and the second request is inspected."""

from __future__ import annotations

import pytest
from provider_test_support import assistant_message, request, tool_result, user

from numi.agent.prepare import prepare_messages
from numi.providers import ToolSpec
from numi.testing import Scenario

TOOLS = [ToolSpec("get_weather"), ToolSpec("get_time")]


def run_step(scripted, adapter, messages, model, *, policy="auto", **settings):
    """One model call as the agent makes it; returns the stored assistant message."""
    prepared = prepare_messages(messages, kind=adapter.kind, reasoning_policy=policy, model=model)
    events = list(adapter.stream(request(*prepared, model=model, tools=TOOLS, **settings)))
    _stepped[id(scripted)] = model
    return assistant_message(events)


# The model of each provider's latest run_step: `step_request` finds that step's request by it.
_stepped: dict[int, str] = {}


@pytest.fixture(autouse=True)
def _no_earlier_steps():
    _stepped.clear()


def step_request(scripted):
    """The latest request of this test's steps, found by its model: a request of another
    test must not pass for this test's. One did in CI: a thread an earlier test left running
    retried its call here (the `make_adapter` fixture now waits for such threads)."""
    model = _stepped.get(id(scripted))
    if model is None:  # a test that calls the adapter itself
        return scripted.last_request
    return next(r for r in reversed(scripted.requests) if (r.body or {}).get("model") == model)


def tool_loop(scripted, adapter, model, first_step, *, policy="auto", **settings):
    """Step 1 streams `first_step`; step 2 continues after the tool result. Returns the
    body of the second request."""
    scripted.enqueue(first_step, Scenario().text("It is 18 C."))
    history = [user("Weather in Paris?")]
    stored = run_step(scripted, adapter, history, model, policy=policy, **settings)
    history += [stored, tool_result(stored["tool_calls"][0]["id"], "18 C")]
    run_step(scripted, adapter, history, model, policy=policy, **settings)
    return step_request(scripted).body


def thinking_then_tool():
    return (
        Scenario()
        .reasoning("Need the weather tool.", signature="EqQBsig+/==")
        .redacted_thinking("EmwKAhgB-redacted")
        .text("Checking.")
        .tool_call("get_weather", {"city": "Paris"}, id="toolu_01")
    )


# --- Anthropic ----------------------------------------------------------------------------


def test_anthropic_signed_thinking_is_replayed_unmodified_in_the_tool_loop(scripted, make_adapter):
    body = tool_loop(
        scripted,
        make_adapter("anthropic"),
        "claude-test-4",
        thinking_then_tool(),
        reasoning_effort="high",
    )

    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Need the weather tool.", "signature": "EqQBsig+/=="},
        {"type": "redacted_thinking", "data": "EmwKAhgB-redacted"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": "18 C",
    }
    assert body["thinking"]["type"] == "enabled"  # effort mode does not strip reasoning


def test_anthropic_strip_policy_sends_no_thinking(scripted, make_adapter):
    body = tool_loop(
        scripted, make_adapter("anthropic"), "claude-test-4", thinking_then_tool(), policy="strip"
    )

    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use"]


def earlier_turn(details, **extra):
    return [
        user("First question"),
        {
            "role": "assistant",
            "content": "First answer",
            "reasoning_content": "old thoughts",
            "reasoning_details": details,
            **extra,
        },
        user("Second question"),
    ]


ANTHROPIC_DETAILS = {
    "format": "anthropic",
    "model": "claude-test-4",
    "items": [{"type": "thinking", "thinking": "old thoughts", "signature": "sig-old"}],
}


@pytest.mark.parametrize(
    "policy, replayed", [("auto", False), ("preserve", True), ("strip", False)]
)
def test_anthropic_earlier_turn_thinking_per_policy(scripted, make_adapter, policy, replayed):
    run_step(
        scripted,
        make_adapter("anthropic"),
        earlier_turn(ANTHROPIC_DETAILS),
        "claude-test-4",
        policy=policy,
    )

    blocks = step_request(scripted).body["messages"][1]["content"]
    assert (blocks[0]["type"] == "thinking") is replayed


def test_anthropic_thinking_from_another_model_is_dropped(scripted, make_adapter):
    run_step(
        scripted,
        make_adapter("anthropic"),
        earlier_turn(ANTHROPIC_DETAILS),
        "claude-other-5",
        policy="preserve",
    )

    assert [b["type"] for b in step_request(scripted).body["messages"][1]["content"]] == ["text"]


def test_anthropic_never_forges_thinking_from_plain_reasoning_text(scripted, make_adapter):
    chat_details = {
        "format": "openai_chat",
        "model": "claude-test-4",
        "field": "reasoning_content",
        "items": [],
    }
    run_step(
        scripted,
        make_adapter("anthropic"),
        earlier_turn(chat_details),
        "claude-test-4",
        policy="preserve",
    )

    assert "old thoughts" not in str(step_request(scripted).body)


# --- OpenAI Responses -------------------------------------------------------------------


def test_responses_encrypted_reasoning_item_precedes_its_function_call(scripted, make_adapter):
    first = (
        Scenario()
        .reasoning("Need the tool.", encrypted="gAAAAB-opaque")
        .tool_call("get_weather", {"city": "Paris"}, id="call_1")
    )
    body = tool_loop(
        scripted, make_adapter("openai_responses"), "o4-mini", first, reasoning_effort="medium"
    )

    items = body["input"]
    assert [i.get("type") for i in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert items[1]["encrypted_content"] == "gAAAAB-opaque"
    assert items[1]["id"] == "rs_0"
    assert items[2]["call_id"] == items[3]["call_id"] == "call_1"
    assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False


def test_responses_strip_policy_sends_no_reasoning_items(scripted, make_adapter):
    first = Scenario().reasoning("Need the tool.").tool_call("get_weather", {"city": "Paris"})
    body = tool_loop(
        scripted,
        make_adapter("openai_responses"),
        "o4-mini",
        first,
        policy="strip",
        reasoning_effort="medium",
    )

    assert "reasoning" not in [i.get("type") for i in body["input"]]


RESPONSES_DETAILS = {
    "format": "openai_responses",
    "model": "o4-mini",
    "items": [
        {"type": "reasoning", "id": "rs_old", "summary": [], "encrypted_content": "gAAAAB-old"},
        {"type": "reasoning", "id": "rs_bare", "summary": []},  # no encrypted content
    ],
}


@pytest.mark.parametrize(
    "policy, expected", [("auto", []), ("preserve", ["rs_old"]), ("strip", [])]
)
def test_responses_earlier_turn_items_per_policy(scripted, make_adapter, policy, expected):
    run_step(
        scripted,
        make_adapter("openai_responses"),
        earlier_turn(RESPONSES_DETAILS),
        "o4-mini",
        policy=policy,
    )

    reasoning_ids = [
        i["id"] for i in step_request(scripted).body["input"] if i.get("type") == "reasoning"
    ]
    assert (
        reasoning_ids == expected
    )  # a bare id (no encrypted content) is never sent: 404 under store:false


# --- Chat Completions servers -----------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["reasoning_content", "reasoning"], ids=["deepseek", "ollama-vllm"]
)
def test_chat_reasoning_goes_back_on_tool_call_messages_in_the_field_it_came_in(
    scripted, make_adapter, field
):
    first = (
        Scenario()
        .reasoning("I should call the tool.", chat_field=field)
        .tool_call("get_weather", {"city": "Paris"})
    )
    body = tool_loop(
        scripted, make_adapter("openai_chat"), "deepseek-reasoner", first, reasoning_effort="high"
    )

    assistant = body["messages"][1]
    assert assistant[field] == "I should call the tool."
    other = "reasoning" if field == "reasoning_content" else "reasoning_content"
    assert other not in assistant  # vLLM silently drops the field it does not read
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"


def test_chat_tool_call_reasoning_is_sent_in_all_later_requests(scripted, make_adapter):
    # DeepSeek thinking mode: tool-call turns keep their reasoning_content for good.
    adapter = make_adapter("openai_chat")
    scripted.enqueue(
        Scenario().reasoning("Tool needed.").tool_call("get_weather", {}),
        Scenario().reasoning("Done thinking.").text("18 C."),
        Scenario().text("Bye."),
    )
    history = [user("Weather?")]
    stored = run_step(scripted, adapter, history, "deepseek-reasoner")
    history += [stored, tool_result(stored["tool_calls"][0]["id"], "18 C")]
    history.append(run_step(scripted, adapter, history, "deepseek-reasoner"))
    history.append(user("Thanks"))
    run_step(scripted, adapter, history, "deepseek-reasoner")

    messages = step_request(scripted).body["messages"]
    assert messages[1]["reasoning_content"] == "Tool needed."  # tool-call turn: kept
    assert "reasoning_content" not in messages[3]  # plain answer: never sent back (R1 400s)


def test_openrouter_reasoning_details_go_back_unmodified(scripted, make_adapter):
    first = (
        Scenario()
        .reasoning("Plan: call tool.", chunks=2, chat_field="openrouter", signature="EqQB-or")
        .tool_call("get_weather", {})
    )
    body = tool_loop(scripted, make_adapter("openai_chat"), "anthropic/claude-sonnet-4.5", first)

    assistant = body["messages"][1]
    assert assistant["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "format": "anthropic-claude-v1",
            "index": 0,
            "text": "Plan: call tool.",
            "signature": "EqQB-or",
        }
    ]


def test_openai_proper_gets_no_reasoning_fields(scripted, make_adapter):
    # OpenAI's Chat Completions streams no reasoning, so nothing is stored or sent back.
    first = Scenario().tool_call("get_weather", {"city": "Paris"})
    body = tool_loop(scripted, make_adapter("openai_chat"), "gpt-4.1", first)

    assert set(body["messages"][1]) == {"role", "content", "tool_calls"}


@pytest.mark.parametrize("policy, sent", [("auto", False), ("preserve", True), ("strip", False)])
def test_chat_plain_answer_reasoning_per_policy(scripted, make_adapter, policy, sent):
    details = {"format": "openai_chat", "model": "qwen3", "field": "reasoning", "items": []}
    run_step(scripted, make_adapter("openai_chat"), earlier_turn(details), "qwen3", policy=policy)

    assistant = step_request(scripted).body["messages"][1]
    assert (assistant.get("reasoning") == "old thoughts") is sent


def test_chat_preserve_sends_reasoning_without_provenance_as_reasoning_content(
    scripted, make_adapter
):
    messages = [
        user("q"),
        {"role": "assistant", "content": "a", "reasoning_content": "thoughts"},
        user("q2"),
    ]
    run_step(scripted, make_adapter("openai_chat"), messages, "deepseek-chat", policy="preserve")

    assert step_request(scripted).body["messages"][1]["reasoning_content"] == "thoughts"


# --- structure repairs ------------------------------------------------------------------


def test_unanswered_tool_calls_get_a_result_and_orphan_results_are_dropped(scripted, adapter):
    messages = [
        user("Do two things"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        tool_result("call_1", "done"),
        tool_result("call_99", "orphan"),
        user("Stopped. Try again?"),
    ]
    prepared = prepare_messages(messages, kind=adapter.kind)

    assert [m.get("tool_call_id") for m in prepared if m["role"] == "tool"] == ["call_1", "call_2"]
    assert "interrupted" in prepared[3]["content"]
    scripted.enqueue(Scenario().text("ok"))
    assert list(adapter.stream(request(*prepared)))[-1].reason == "stop"
    assert "orphan" not in str(step_request(scripted).body)


def test_replay_sends_the_provider_ids_of_calls_stored_under_numi_ids(scripted, adapter):
    """Numi names every call with its own id (unique in the chat); the provider still gets
    back the ids it gave, even when it gave two calls the same one."""
    calls = [
        {
            "id": f"nc_{n}",
            "provider_id": "dup_01",
            "type": "function",
            "function": {"name": "get_time", "arguments": "{}"},
        }
        for n in (1, 2)
    ]
    messages = [
        user("Twice"),
        {"role": "assistant", "content": "", "tool_calls": calls},
        tool_result("nc_2", "second"),
        tool_result("nc_1", "first"),
        user("And?"),
    ]
    prepared = prepare_messages(messages, kind=adapter.kind)
    assert [c["id"] for c in prepared[1]["tool_calls"]] == ["dup_01", "dup_01"]
    assert all("provider_id" not in c for c in prepared[1]["tool_calls"])
    assert [(m["tool_call_id"], m["content"]) for m in prepared[2:4]] == [
        ("dup_01", "second"),
        ("dup_01", "first"),
    ]
    assert messages[1]["tool_calls"] == calls and calls[0]["id"] == "nc_1", (
        "the input is not changed"
    )
    scripted.enqueue(Scenario().text("ok"))
    list(adapter.stream(request(*prepared)))
    body = str(step_request(scripted).body)
    assert "dup_01" in body and "nc_1" not in body and "nc_2" not in body


def test_prepare_does_not_mutate_its_input():
    messages = [{"role": "assistant", "content": "a", "reasoning_content": "r", "_db_id": 1}]
    prepare_messages(messages, kind="anthropic", reasoning_policy="strip")
    assert messages == [
        {"role": "assistant", "content": "a", "reasoning_content": "r", "_db_id": 1}
    ]
