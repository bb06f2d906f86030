"""Bad input on /v1: each refusal in the protocol's own shape, as the official SDKs parse
it, with a stable code, and nothing changed (no model call, no chat, no usage)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def nothing_changes(gateway, scripted):
    """Asserts after the test that no model was called and no chat or usage was written."""

    def chats():
        status, body = gateway.api.get("/api/sessions?limit=500")
        assert status == 200, body
        return len(body["sessions"])

    def requests_counted():
        status, body = gateway.api.get("/api/usage?group=key&period=all")
        assert status == 200, body
        return body["total"]["answers"]

    before = chats(), requests_counted()
    yield
    assert scripted.requests == []
    assert (chats(), requests_counted()) == before


def openai_refusal(call) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    return caught.value


@pytest.fixture
def anthropic_refusal(anthropic_sdk):
    """`anthropic_refusal(call)`: the SDK's error that `call()` raises, as `openai_refusal`."""

    def refusal(call):
        with pytest.raises(anthropic_sdk.APIStatusError) as caught:
            call()
        return caught.value

    return refusal


def test_no_key_a_wrong_key_and_a_revoked_key_are_refused(
    gateway, nothing_changes, anthropic_refusal
):
    error = openai_refusal(lambda: gateway.openai(key="none").models.list())
    assert (error.status_code, error.code) == (401, "api_key_invalid")
    secret, key_id = gateway.new_key(name="soon revoked")
    assert gateway.openai(key=secret).models.list()
    status, _ = gateway.api.call("DELETE", f"/api/keys/{key_id}")
    assert status == 204
    error = anthropic_refusal(
        lambda: gateway.anthropic(key=secret).messages.create(model="x", max_tokens=5, messages=HI)
    )
    assert error.status_code == 401
    assert error.body["error"] == {
        "type": "authentication_error",
        "message": "This API key is not valid, or it was revoked.",
        "code": "api_key_invalid",
    }
    request = urllib.request.Request(gateway.openai_base + "/models")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(request, timeout=30)
    assert json.loads(missing.value.read())["error"]["code"] == "api_key_missing"


def test_only_a_key_opens_v1_and_a_key_opens_nothing_else(gateway):
    # The access token (and so a signed-in browser) does not open /v1 ...
    error = openai_refusal(lambda: gateway.openai(key=gateway.server.token).models.list())
    assert error.code == "api_key_invalid"
    # ... and a key opens no other route.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(
                gateway.server.url + "/api/sessions",
                headers={"Authorization": f"Bearer {gateway.key}"},
            ),
            timeout=30,
        )
    assert refused.value.code == 401


def test_a_model_outside_the_keys_scope_or_unknown_is_refused(
    gateway, nothing_changes, anthropic_refusal
):
    secret, _ = gateway.new_key(name="alpha only", endpoints=[gateway.alpha["id"]])
    ids = [m.id for m in gateway.openai(key=secret).models.list()]
    assert ids and all(i.startswith("alpha/") for i in ids)
    error = openai_refusal(
        lambda: gateway.openai(key=secret).chat.completions.create(
            model="beta/scripted-model", messages=HI
        )
    )
    assert (error.status_code, error.code, error.param) == (403, "api_key_scope", "model")
    error = openai_refusal(
        lambda: gateway.openai().chat.completions.create(model="alpha/no-such-model", messages=HI)
    )
    assert (error.status_code, error.code) == (404, "unknown_model")
    assert "/v1/models" in error.message
    error = anthropic_refusal(
        lambda: gateway.anthropic().messages.create(model="nope", max_tokens=5, messages=HI)
    )
    assert error.status_code == 404 and error.body["error"]["type"] == "not_found_error"
    assert error.body["error"]["code"] == "unknown_model"


BAD_CHAT_BODIES = [
    ("not json", b"{nope", "invalid_body", None),
    (
        "messages not a list",
        {"model": "alpha/scripted-model", "messages": "hi"},
        "invalid_body",
        "messages",
    ),
    (
        "temperature of the wrong type",
        {"model": "alpha/scripted-model", "messages": HI, "temperature": "hot"},
        "invalid_body",
        "temperature",
    ),
    (
        "an unknown reasoning effort",
        {"model": "alpha/scripted-model", "messages": HI, "reasoning_effort": "huge"},
        "invalid_body",
        "reasoning_effort",
    ),
    (
        "an unknown role",
        {"model": "alpha/scripted-model", "messages": [{"role": "robot", "content": "x"}]},
        "invalid_body",
        "messages[0].role",
    ),
    (
        "stream_options without stream",
        {
            "model": "alpha/scripted-model",
            "messages": HI,
            "stream_options": {"include_usage": True},
        },
        "stream_mixup",
        "stream_options",
    ),
    (
        "a tool result without its call",
        {
            "model": "alpha/scripted-model",
            "messages": HI + [{"role": "tool", "tool_call_id": "call_9", "content": "18 C"}],
        },
        "tool_result_without_call",
        "messages[1].tool_call_id",
    ),
    (
        "too many messages",
        {"model": "alpha/scripted-model", "messages": HI * 51},
        "too_many_messages",
        "messages",
    ),
    (
        "more tokens than the model holds",
        {
            "model": "alpha/scripted-model",
            "messages": [{"role": "user", "content": "word " * 40_000}],
        },
        "too_many_tokens",
        "messages",
    ),
]


@pytest.mark.parametrize(
    "label, body, code, param", BAD_CHAT_BODIES, ids=[b[0] for b in BAD_CHAT_BODIES]
)
def test_a_bad_chat_completions_body_is_refused_in_openais_shape(
    gateway, nothing_changes, label, body, code, param
):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    error = openai_refusal(
        lambda: gateway.openai().post(
            "/chat/completions",
            content=raw,
            cast_to=object,
            options={"headers": {"Content-Type": "application/json"}},
        )
    )
    assert (error.status_code, error.code, error.param) == (400, code, param)
    assert error.type == "invalid_request_error"


def test_a_bad_messages_body_is_refused_in_anthropics_shape(
    gateway, nothing_changes, anthropic_refusal
):
    client = gateway.anthropic()
    orphan = HI + [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}],
        }
    ]
    error = anthropic_refusal(
        lambda: client.messages.create(model="beta/scripted-model", max_tokens=5, messages=orphan)
    )
    assert error.status_code == 400
    assert error.body["error"]["type"] == "invalid_request_error"
    assert error.body["error"]["code"] == "tool_result_without_call"
    error = anthropic_refusal(
        lambda: client.messages.create(
            model="beta/scripted-model",
            max_tokens=5,
            messages=HI,
            thinking={"type": "enabled", "budget_tokens": 5},
        )
    )
    assert error.body["error"]["code"] == "invalid_body"


def test_a_body_over_the_limit_is_refused_as_too_large(gateway, nothing_changes, anthropic_refusal):
    huge = [{"role": "user", "content": "x" * 300_000}]
    error = anthropic_refusal(
        lambda: gateway.anthropic().messages.create(
            model="beta/scripted-model", max_tokens=5, messages=huge
        )
    )
    assert error.status_code == 413 and error.body["error"]["code"] == "body_too_large"
    assert error.body["error"]["type"] == "request_too_large"
