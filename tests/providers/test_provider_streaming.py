"""Neutral events from each adapter, streamed through the real SDKs from the scripted
provider."""

from __future__ import annotations

import pytest
from provider_test_support import joined, of_type, request

from numi.providers import (
    Finish,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from numi.testing import Scenario


def test_text_arrives_in_chunks_and_ends_with_stop(scripted, adapter):
    scripted.enqueue(Scenario().text("Hello, scripted world!", chunks=5).usage(11, 7))

    events = list(adapter.stream(request()))

    texts = of_type(events, TextDelta)
    assert len(texts) == 5
    assert joined(events, TextDelta) == "Hello, scripted world!"
    assert events[-1] == Finish("stop", events[-1].raw_reason, None)
    usage = of_type(events, Usage)[0]
    assert (usage.input_tokens, usage.output_tokens) == (11, 7)


def test_parallel_tool_calls_are_assembled_by_index(scripted, adapter):
    scripted.enqueue(
        Scenario()
        .text("Checking both.")
        .tool_call("get_weather", {"city": "Paris"}, id="call_A", fragments=4)
        .tool_call("get_time", {"tz": "CET"}, id="call_B", fragments=3)
    )

    events = list(adapter.stream(request()))

    starts = [d for d in of_type(events, ToolCallDelta) if d.id]
    assert [(d.index, d.id, d.name) for d in starts] == [
        (0, "call_A", "get_weather"),
        (1, "call_B", "get_time"),
    ]
    fragments = "".join(
        d.arguments_fragment for d in of_type(events, ToolCallDelta) if d.index == 0
    )
    assert fragments == '{"city": "Paris"}'
    calls = of_type(events, ToolCallComplete)
    assert [(c.index, c.id, c.name, c.arguments) for c in calls] == [
        (0, "call_A", "get_weather", {"city": "Paris"}),
        (1, "call_B", "get_time", {"tz": "CET"}),
    ]
    assert joined(events, TextDelta) == "Checking both."
    assert events[-1].reason == "tool_calls"


def test_invalid_tool_arguments_become_an_error_the_model_can_read(scripted, adapter):
    scripted.enqueue(Scenario().tool_call("get_weather", '{"city": "Par', fragments=2))

    events = list(adapter.stream(request()))

    (call,) = of_type(events, ToolCallComplete)
    assert call.arguments is None
    assert "not valid JSON" in call.arguments_error
    assert call.arguments_json == '{"city": "Par'
    assert events[-1].reason == "tool_calls"


def test_tool_call_without_arguments_gets_an_empty_object(scripted, adapter):
    scripted.enqueue(Scenario().tool_call("current_time", ""))

    (call,) = of_type(list(adapter.stream(request())), ToolCallComplete)

    assert call.arguments == {} and call.arguments_error is None


@pytest.mark.parametrize(
    "neutral, raw_by_kind",
    [
        ("stop", {"openai_chat": "stop", "openai_responses": "completed", "anthropic": "end_turn"}),
        (
            "length",
            {
                "openai_chat": "length",
                "openai_responses": "max_output_tokens",
                "anthropic": "max_tokens",
            },
        ),
        (
            "content_filter",
            {
                "openai_chat": "content_filter",
                "openai_responses": "content_filter",
                "anthropic": "refusal",
            },
        ),
    ],
)
def test_finish_reasons_map_to_the_neutral_vocabulary(
    scripted, adapter, kind, neutral, raw_by_kind
):
    scripted.enqueue(Scenario().text("Partial").finish(neutral))

    finish = list(adapter.stream(request()))[-1]

    assert finish == Finish(neutral, raw_by_kind[kind], None)


@pytest.mark.parametrize(
    "kind, raw, neutral",
    [
        ("openai_chat", "insufficient_system_resource", "other"),  # DeepSeek
        ("anthropic", "model_context_window_exceeded", "length"),
        ("anthropic", "pause_turn", "other"),
        ("anthropic", "stop_sequence", "stop"),
    ],
)
def test_provider_specific_finish_reasons(scripted, make_adapter, kind, raw, neutral):
    scripted.enqueue(Scenario().text("x").finish("stop", raw=raw))

    finish = list(make_adapter(kind).stream(request()))[-1]

    assert (finish.reason, finish.raw_reason) == (neutral, raw)


def test_stop_with_tool_calls_is_reported_as_tool_calls(scripted, make_adapter):
    # Some Ollama builds end a tool-calling step with finish_reason "stop".
    scripted.enqueue(Scenario().tool_call("current_time", {}).finish("stop"))

    events = list(make_adapter("openai_chat").stream(request()))

    assert events[-1].reason == "tool_calls" and events[-1].raw_reason == "stop"


# --- reasoning, per provider flavour ------------------------------------------------------


def test_anthropic_thinking_with_signature_and_redacted_block(scripted, make_adapter):
    scripted.enqueue(
        Scenario()
        .reasoning("Need the weather tool.", chunks=3, signature="EqQBCkgI-sig")
        .redacted_thinking("EmwKAhgB-redacted")
        .text("Checking.")
        .tool_call("get_weather", {"city": "Paris"}, id="toolu_01")
    )

    events = list(make_adapter("anthropic").stream(request(model="claude-test-4")))

    assert joined(events, ReasoningDelta) == "Need the weather tool."
    # Three pieces of text, then the block's signature as it ends (a relay passes it on).
    deltas = of_type(events, ReasoningDelta)
    assert len(deltas) == 4 and deltas[-1] == ReasoningDelta("", signature="EqQBCkgI-sig")
    assert events[-1].reasoning_details == {
        "format": "anthropic",
        "model": "claude-test-4",
        "items": [
            {"type": "thinking", "thinking": "Need the weather tool.", "signature": "EqQBCkgI-sig"},
            {"type": "redacted_thinking", "data": "EmwKAhgB-redacted"},
        ],
    }


def test_responses_reasoning_summary_and_encrypted_item(scripted, make_adapter):
    scripted.enqueue(
        Scenario()
        .reasoning("Need the weather tool.", chunks=2, encrypted="gAAAAB-opaque")
        .tool_call("get_weather", {"city": "Paris"}, id="call_1")
        .usage(52, 87, 64)
    )

    events = list(
        make_adapter("openai_responses").stream(request(model="o4-mini", reasoning_effort="medium"))
    )

    assert joined(events, ReasoningDelta) == "Need the weather tool."
    (item,) = events[-1].reasoning_details["items"]
    assert item["type"] == "reasoning" and item["encrypted_content"] == "gAAAAB-opaque"
    assert item["summary"] == [{"type": "summary_text", "text": "Need the weather tool."}]
    assert of_type(events, Usage)[0].reasoning_tokens == 64


@pytest.mark.parametrize(
    "field", ["reasoning_content", "reasoning"], ids=["deepseek-llamacpp", "ollama-vllm"]
)
def test_chat_reasoning_fields_of_compatible_servers(scripted, make_adapter, field):
    scripted.enqueue(
        Scenario().reasoning("Okay, compare.", chunks=2, chat_field=field).text("9.8 is larger.")
    )

    events = list(make_adapter("openai_chat").stream(request(model="deepseek-reasoner")))

    assert joined(events, ReasoningDelta) == "Okay, compare."
    assert joined(events, TextDelta) == "9.8 is larger."
    assert events[-1].reasoning_details == {
        "format": "openai_chat",
        "model": "deepseek-reasoner",
        "field": field,
        "items": [],
    }


def test_openrouter_reasoning_details_are_merged_by_index(scripted, make_adapter):
    scripted.enqueue(
        Scenario()
        .reasoning("Plan: call tool.", chunks=3, chat_field="openrouter", signature="EqQB-or-sig")
        .tool_call("get_weather", {"city": "Paris"})
    )

    events = list(make_adapter("openai_chat").stream(request(model="anthropic/claude-sonnet-4.5")))

    assert joined(events, ReasoningDelta) == "Plan: call tool."
    assert events[-1].reasoning_details["format"] == "openrouter"
    assert events[-1].reasoning_details["items"] == [
        {
            "type": "reasoning.text",
            "format": "anthropic-claude-v1",
            "index": 0,
            "text": "Plan: call tool.",
            "signature": "EqQB-or-sig",
        }
    ]


def test_think_tags_in_content_become_reasoning(scripted, make_adapter):
    # llama.cpp with --reasoning-format none, or a model served without a parser.
    scripted.enqueue(
        Scenario()
        .reasoning("Let me see.", chunks=4, chat_field="think_tag")
        .text("Answer.", chunks=2)
    )

    events = list(make_adapter("openai_chat").stream(request()))

    assert joined(events, ReasoningDelta) == "Let me see."
    assert joined(events, TextDelta) == "Answer."
    assert events[-1].reasoning_details is None  # nothing the server could take back


def test_text_mentioning_think_tag_later_is_left_alone(scripted, make_adapter):
    scripted.enqueue(Scenario().text("Use <think> tags like <think>this</think>.", chunks=6))

    events = list(make_adapter("openai_chat").stream(request()))

    assert joined(events, TextDelta) == "Use <think> tags like <think>this</think>."
    assert not of_type(events, ReasoningDelta)


def test_a_fast_stream_of_thousands_of_chunks(scripted, adapter):
    text = "token " * 3000
    scripted.enqueue(Scenario().text(text, chunks=3000))

    events = list(adapter.stream(request()))

    assert joined(events, TextDelta) == text
    assert isinstance(events[-1], Finish)


def test_paced_stream_arrives_over_time(scripted, adapter):
    scripted.enqueue(Scenario().text("abcdef", chunks=6).delay(0.02))

    events = list(adapter.stream(request()))

    assert joined(events, TextDelta) == "abcdef"
    # Each chunk was written after its pause (the server stamps them), and each reached
    # us as its own delta: the pacing is real, without timing the test itself.
    assert len(scripted.last_request.delta_times) == 6
    assert len(of_type(events, TextDelta)) == 6
    assert not of_type(events, StreamError)
