"""What each adapter puts on the wire, read back from the scripted provider's record."""

from __future__ import annotations

import base64

from provider_test_support import request, tool_result, user

from numi.providers import ToolSpec
from numi.testing import Scenario

PNG = b"\x89PNG\r\n\x1a\n-fake-image-bytes"
PNG_B64 = base64.b64encode(PNG).decode()
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

TOOL_TRANSCRIPT = [
    user("Weather in Paris, and the time?"),
    {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [
            {
                "id": "call_A",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_B",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            },
        ],
    },
    tool_result("call_A", '{"temp_c": 18}'),
    tool_result("call_B", "14:05"),
]


def sent(scripted, adapter, req):
    scripted.enqueue(Scenario().text("ok"))
    list(adapter.stream(req))
    return scripted.last_request


def test_chat_request_shape(scripted, make_adapter):
    record = sent(
        scripted,
        make_adapter("openai_chat"),
        request(
            *TOOL_TRANSCRIPT, system="Be terse.", tools=[WEATHER], temperature=0.2, max_tokens=300
        ),
    )

    body = record.body
    assert record.path == "/v1/chat/completions"
    assert record.headers["authorization"] == "Bearer test-key"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert body["messages"][2]["tool_calls"][0] == {
        "id": "call_A",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    assert body["messages"][3:] == [
        {"role": "tool", "tool_call_id": "call_A", "content": '{"temp_c": 18}'},
        {"role": "tool", "tool_call_id": "call_B", "content": "14:05"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 300 and "max_completion_tokens" not in body


def test_responses_request_shape(scripted, make_adapter):
    record = sent(
        scripted,
        make_adapter("openai_responses"),
        request(*TOOL_TRANSCRIPT, system="Be terse.", tools=[WEATHER], max_tokens=300),
    )

    body = record.body
    assert record.path == "/v1/responses"
    assert body["instructions"] == "Be terse."
    assert body["store"] is False
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Weather in Paris, and the time?"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking both."}],
        },
        {
            "type": "function_call",
            "call_id": "call_A",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call", "call_id": "call_B", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_A", "output": '{"temp_c": 18}'},
        {"type": "function_call_output", "call_id": "call_B", "output": "14:05"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert body["max_output_tokens"] == 300
    assert "include" not in body and "reasoning" not in body  # not a reasoning request


def test_anthropic_request_shape(scripted, make_adapter):
    transcript = [*TOOL_TRANSCRIPT, user("Thanks. And tomorrow?")]
    record = sent(
        scripted,
        make_adapter("anthropic"),
        request(
            *transcript, model="claude-test-4", system="Be terse.", tools=[WEATHER], temperature=0.3
        ),
    )

    body = record.body
    assert record.path == "/v1/messages"
    assert "test-key" in (
        record.headers.get("x-api-key", "") + record.headers.get("authorization", "")
    )
    assert "anthropic-version" in record.headers
    assert body["system"] == "Be terse."
    assert body["max_tokens"] == 8192
    assert body["temperature"] == 0.3
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris, and the time?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "call_A",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "call_B", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [  # tool results first, in one user message, then the new text
                {"type": "tool_result", "tool_use_id": "call_A", "content": '{"temp_c": 18}'},
                {"type": "tool_result", "tool_use_id": "call_B", "content": "14:05"},
                {"type": "text", "text": "Thanks. And tomorrow?"},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": WEATHER.parameters,
        }
    ]


IMAGE_MESSAGE = {
    "role": "user",
    "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image", "mime": "image/png", "data": PNG},
        {"type": "document", "name": "notes.txt", "text": "Line one."},
    ],
}


def test_chat_images_become_data_urls_and_documents_text(scripted, make_adapter):
    body = sent(scripted, make_adapter("openai_chat"), request(IMAGE_MESSAGE)).body

    parts = body["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "What is in this image?"}
    assert parts[1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG_B64}"},
    }
    assert (
        parts[2]["type"] == "text"
        and "notes.txt" in parts[2]["text"]
        and "Line one." in parts[2]["text"]
    )


def test_responses_images_become_input_images(scripted, make_adapter):
    body = sent(scripted, make_adapter("openai_responses"), request(IMAGE_MESSAGE)).body

    parts = body["input"][0]["content"]
    assert parts[1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{PNG_B64}",
        "detail": "auto",
    }
    assert parts[2]["type"] == "input_text" and "Line one." in parts[2]["text"]


def test_anthropic_images_become_base64_source_blocks(scripted, make_adapter):
    base64_message = {
        **IMAGE_MESSAGE,
        "content": [
            *IMAGE_MESSAGE["content"][:1],
            {"type": "image", "mime": "image/jpeg", "data": PNG_B64},
        ],
    }
    body = sent(scripted, make_adapter("anthropic"), request(base64_message)).body

    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG_B64},
    }


def test_text_only_user_content_is_sent_as_a_string_to_chat_servers(scripted, make_adapter):
    # Servers without vision support often reject a list of parts.
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Hi"},
            {"type": "document", "name": "a.md", "text": "doc"},
        ],
    }
    body = sent(scripted, make_adapter("openai_chat"), request(message)).body

    assert isinstance(body["messages"][0]["content"], str)


def test_reasoning_settings_per_protocol(scripted, make_adapter):
    chat = sent(scripted, make_adapter("openai_chat"), request(reasoning_effort="high")).body
    assert chat["reasoning_effort"] == "high"

    responses = sent(
        scripted, make_adapter("openai_responses"), request(model="o4-mini", reasoning_effort="low")
    ).body
    assert responses["reasoning"] == {"summary": "auto", "effort": "low"}
    assert responses["include"] == ["reasoning.encrypted_content"]

    anthropic = sent(
        scripted,
        make_adapter("anthropic"),
        request(model="claude-test-4", reasoning_budget=4096, temperature=0.5, max_tokens=2000),
    ).body
    assert anthropic["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert anthropic["max_tokens"] > 4096  # the budget must stay below max_tokens
    assert "temperature" not in anthropic  # refused by the API while thinking


def test_openai_proper_gets_max_completion_tokens(scripted, make_adapter):
    # Reasoning models on api.openai.com reject max_tokens; the host decides.
    from numi.providers.openai_chat import OpenAIChatAdapter

    adapter = OpenAIChatAdapter("https://api.openai.com/v1", "k")
    body = adapter.build_body(request(max_tokens=100))
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_extra_body_fields_pass_through(scripted, make_adapter):
    body = sent(
        scripted, make_adapter("openai_chat"), request(extra={"thinking": {"type": "enabled"}})
    ).body
    assert body["thinking"] == {"type": "enabled"}


def test_internal_fields_never_reach_the_wire(scripted, adapter):
    from numi.agent.prepare import prepare_messages

    messages = [{"role": "user", "content": "hi", "_db_id": 7, "_file_context": ["a.txt"]}]
    record = sent(scripted, adapter, request(*prepare_messages(messages, kind=adapter.kind)))

    assert "_db_id" not in str(record.body) and "_file_context" not in str(record.body)


def test_a_base_url_query_reaches_the_server_on_every_request(scripted, make_adapter, kind):
    """Issue 34: `…/v1?api-key=K` was joined into `…/v1?api-key=K/chat/completions`: the
    query must stay the query, on the turn's POST and on the model listing alike."""
    root = scripted.anthropic_base_url if kind == "anthropic" else scripted.openai_base_url
    adapter = make_adapter(kind, base_url=root + "/?api-key=query-secret&api-version=2024-10-21")
    record = sent(scripted, adapter, request(user("hi")))
    path, _, query = record.path.partition("?")
    assert path.rstrip("/").endswith(("/chat/completions", "/responses", "/messages")), path
    assert query == "api-key=query-secret&api-version=2024-10-21"
    adapter.list_models()
    listing = scripted.listings[-1].path
    assert listing.split("?")[0].endswith("/models") and listing.endswith(query), listing
    assert "query-secret" not in adapter.test_connection(), "the key stays out of messages"
