"""The official openai and anthropic SDKs against a live Numi's /v1: every route,
streaming and not, tools both ways across protocols, reasoning, fallbacks."""

from __future__ import annotations

import json

import openai
import pytest

from numi.testing import Scenario


def test_models_list_names_every_visible_model_for_both_sdks(gateway):
    ids = [m.id for m in gateway.openai().models.list()]
    assert "alpha/scripted-model" in ids and "beta/scripted-reasoning" in ids
    anthropic_ids = [m.id for m in gateway.anthropic().models.list()]
    assert anthropic_ids == ids


def test_chat_completions_streams_text_and_usage_from_an_anthropic_endpoint(gateway, scripted):
    scripted.enqueue(
        Scenario().text("Hello from beta.", chunks=3).usage(11, 4), model="scripted-model"
    )
    stream = gateway.openai().chat.completions.create(
        model="beta/scripted-model",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from beta."
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 11
    assert {c.model for c in chunks} == {"beta/scripted-model"}
    # The endpoint was spoken to in its own protocol.
    assert scripted.last_request.path.endswith("/messages")


def test_chat_completions_without_stream(gateway, scripted):
    scripted.enqueue(Scenario().text("Whole answer.").usage(5, 2), model="scripted-model")
    done = gateway.openai().chat.completions.create(
        model="alpha/scripted-model", messages=[{"role": "user", "content": "Hi"}]
    )
    assert done.choices[0].message.content == "Whole answer."
    assert done.choices[0].finish_reason == "stop"
    assert done.usage.completion_tokens == 2 and done.model == "alpha/scripted-model"


def test_openai_client_tools_round_trip_through_an_anthropic_endpoint(gateway, scripted):
    client = gateway.openai()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    scripted.enqueue(
        Scenario().text("Checking.").tool_call("get_weather", {"city": "Paris"}, fragments=3),
        model="scripted-model",
    )
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with client.chat.completions.stream(
        model="beta/scripted-model", messages=messages, tools=tools
    ) as s:
        final = s.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {
        "city": "Paris"
    }
    scripted.enqueue(Scenario().text("18 C in Paris."), model="scripted-model")
    messages += [
        final.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "18 C"},
    ]
    done = client.chat.completions.create(
        model="beta/scripted-model", messages=messages, tools=tools
    )
    assert done.choices[0].message.content == "18 C in Paris."
    sent = scripted.last_request.body["messages"]
    assert sent[-1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": "18 C",
    }


def test_anthropic_client_streams_thinking_text_and_tools_from_a_chat_completions_endpoint(
    gateway, scripted
):
    scripted.enqueue(
        Scenario()
        .reasoning("Need the tool.", chunks=2)
        .text("Let me look.")
        .tool_call("get_weather", {"city": "Oslo"})
        .usage(20, 9),
        model="scripted-model",
    )
    with gateway.anthropic().messages.stream(
        model="alpha/scripted-model",
        max_tokens=2048,
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[{"name": "get_weather", "input_schema": {"type": "object"}}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        message = stream.get_final_message()
    kinds = [block.type for block in message.content]
    assert kinds == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == "Need the tool."
    assert message.content[2].input == {"city": "Oslo"} and message.stop_reason == "tool_use"
    assert message.model == "alpha/scripted-model" and message.usage.output_tokens == 9


def test_anthropic_client_without_stream_keeps_signed_thinking_for_the_tool_loop(gateway, scripted):
    scripted.enqueue(
        Scenario().reasoning("Plan.").tool_call("lookup", {"q": "x"}), model="scripted-model"
    )
    client = gateway.anthropic()
    ask = [{"role": "user", "content": "Look it up."}]
    first = client.messages.create(
        model="beta/scripted-model",
        max_tokens=4096,
        messages=ask,
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    )
    thinking, call = first.content[0], first.content[-1]
    assert thinking.type == "thinking" and thinking.signature
    scripted.enqueue(Scenario().text("Found it."), model="scripted-model")
    second = client.messages.create(
        model="beta/scripted-model",
        max_tokens=4096,
        messages=ask
        + [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "42"}],
            },
        ],
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    )
    assert second.content[0].text == "Found it."
    replayed = scripted.last_request.body["messages"][1]["content"][0]
    assert replayed == {"type": "thinking", "thinking": "Plan.", "signature": thinking.signature}


def test_a_failure_before_output_falls_back_and_says_who_answered(gateway, scripted):
    scripted.enqueue(Scenario.http_error(529, retry_after=0), model="scripted-model")
    scripted.enqueue(Scenario().text("Backup here."), model="scripted-reasoning")
    raw = gateway.openai().chat.completions.with_raw_response.create(
        model="alpha/scripted-model", messages=[{"role": "user", "content": "Hi"}]
    )
    done = raw.parse()
    assert done.choices[0].message.content == "Backup here."
    assert done.model == "beta/scripted-reasoning"
    assert "scripted-model returned 529" in raw.headers["x-numi-fallback"]


def test_a_streamed_thinking_block_from_anthropic_keeps_its_signature(gateway, scripted):
    scripted.enqueue(Scenario().reasoning("Plan.", chunks=2).text("Done."), model="scripted-model")
    with gateway.anthropic().messages.stream(
        model="beta/scripted-model",
        max_tokens=4096,
        messages=[{"role": "user", "content": "Go."}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        message = stream.get_final_message()
    thinking, text = message.content
    assert (thinking.thinking, text.text) == ("Plan.", "Done.")
    assert thinking.signature == "sig-EqQBCkgIAhABGAIiQ"


def test_responses_stream_and_not_with_a_function_call_round_trip(gateway, scripted):
    client = gateway.openai()
    tools = [
        {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": False}
    ]
    scripted.enqueue(
        Scenario()
        .reasoning("Think.")
        .text("One moment.")
        .tool_call("get_time", {"tz": "CET"})
        .usage(9, 6),
        model="scripted-model",
    )
    with client.responses.stream(
        model="beta/scripted-model", input="What time is it?", tools=tools, instructions="Be brief."
    ) as stream:
        first = stream.get_final_response()
    kinds = [item.type for item in first.output]
    assert kinds == ["reasoning", "message", "function_call"]
    assert first.output_text == "One moment." and first.usage.output_tokens == 6
    call = first.output[-1]
    assert (call.name, json.loads(call.arguments)) == ("get_time", {"tz": "CET"})
    assert first.model == "beta/scripted-model"
    scripted.enqueue(Scenario().text("It is noon."), model="scripted-model")
    done = client.responses.create(
        model="beta/scripted-model",
        tools=tools,
        input=[
            {"role": "user", "content": "What time is it?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": "get_time",
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "12:00"},
        ],
    )
    assert done.output_text == "It is noon." and done.status == "completed"
    # The instructions reached the Anthropic endpoint as its system prompt; the output as
    # the tool result of the call.
    assert scripted.requests[-2].body["system"] == "Be brief."
    assert scripted.last_request.body["messages"][-1]["content"][0]["tool_use_id"] == call.call_id


def test_an_image_reaches_an_anthropic_endpoint_as_an_image_block(gateway, scripted):
    scripted.enqueue(Scenario().text("A red dot."), model="scripted-model")
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    gateway.openai().chat.completions.create(
        model="beta/scripted-model",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
                ],
            }
        ],
    )
    blocks = scripted.last_request.body["messages"][0]["content"]
    assert blocks[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": pixel},
    }


def test_a_failure_after_output_ends_the_stream_with_the_protocols_error(
    gateway, scripted, anthropic_sdk
):

    scripted.enqueue(
        Scenario().text("Half an ans").error_event("overloaded"), model="scripted-model"
    )
    seen = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in gateway.openai().chat.completions.create(
            model="alpha/scripted-model", messages=[{"role": "user", "content": "Hi"}], stream=True
        ):
            seen.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "".join(seen) == "Half an ans" and "overload" in str(caught.value).lower()
    scripted.enqueue(Scenario().text("Half").error_event("overloaded"), model="scripted-model")
    with pytest.raises(anthropic_sdk.APIStatusError) as failed:
        with gateway.anthropic().messages.stream(
            model="alpha/scripted-model",
            max_tokens=100,
            messages=[{"role": "user", "content": "Hi"}],
        ) as stream:
            stream.get_final_message()
    assert failed.value.body["error"]["type"] in ("overloaded_error", "api_error")
