"""What llama.cpp's server and the LiteLLM proxy really send (issue 23), replayed byte for
byte by the scripted provider (numi/testing/recordings.py names each recording's source)
and read through the real openai and anthropic SDKs."""

from __future__ import annotations

import pytest
from provider_test_support import joined, of_type, request

from numi.providers import (
    Finish,
    ProviderError,
    ReasoningDelta,
    RetryPolicy,
    StreamError,
    TextDelta,
    Usage,
)
from numi.testing import Scenario
from numi.testing import recordings as rec

# --- llama-server: Chat Completions -----------------------------------------------------------


@pytest.mark.parametrize(
    "recording",
    [rec.LLAMA_SERVER_CHAT_SPLIT_THINK, rec.LLAMA_SERVER_CHAT_WHOLE_THINK],
    ids=["split-tags", "one-chunk"],
)
def test_think_tags_give_the_same_answer_split_or_whole(scripted, make_adapter, recording):
    scripted.enqueue(Scenario.replay(recording))

    events = list(make_adapter("openai_chat").stream(request(model="qwen3-0.6b")))

    assert joined(events, ReasoningDelta) == "The user said hi."
    assert joined(events, TextDelta) == "Hello there!"
    assert events[-1] == Finish("stop", "stop", None)


def test_llama_server_usage_with_cache_reads_and_timings(scripted, make_adapter):
    scripted.enqueue(Scenario.replay(rec.LLAMA_SERVER_CHAT_SPLIT_THINK))

    events = list(make_adapter("openai_chat").stream(request(model="qwen3-0.6b")))

    (usage,) = of_type(events, Usage)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (99, 20, 12)


def test_llama_server_overflow_body_carries_its_numbers(scripted, make_adapter):
    scripted.enqueue(Scenario.http_error(400, body=rec.LLAMA_SERVER_OVERFLOW))

    events = list(make_adapter("openai_chat").stream(request()))

    (error,) = events
    assert isinstance(error, StreamError) and error.code == "context_overflow"
    assert error.overflow == (479, 256)
    assert "479 tokens" in error.message and len(scripted.requests) == 1  # not retried


# --- llama-server: Responses ----------------------------------------------------------------


def test_responses_completed_with_status_incomplete_is_length(scripted, make_adapter):
    scripted.enqueue(Scenario.replay(rec.LLMOCK_RESPONSES_CUT_OFF))

    events = list(make_adapter("openai_responses").stream(request(model="qwen3-0.6b")))

    assert joined(events, TextDelta) == "Once upon a time"
    assert events[-1] == Finish("length", "max_output_tokens", None)
    (usage,) = of_type(events, Usage)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (99, 20, 4)


# --- Anthropic kind: the whole prompt counts --------------------------------------------------


@pytest.mark.parametrize(
    "recording, counts",
    [
        # llama-server: the counts in message_start, 1 uncached + 20 read from the cache.
        (rec.LLAMA_SERVER_ANTHROPIC_CACHED, (21, 20, 10)),
        # LiteLLM: zeros in message_start, the real counts in message_delta.
        (rec.LITELLM_ANTHROPIC_DELTA_USAGE, (62, 21, 10)),
    ],
    ids=["llama-server", "litellm"],
)
def test_anthropic_input_counts_cache_reads_from_the_last_event(
    scripted, make_adapter, recording, counts
):
    scripted.enqueue(Scenario.replay(recording))

    events = list(make_adapter("anthropic").stream(request(model="llama-tool")))

    assert joined(events, TextDelta) == "Hello there!"
    (usage,) = of_type(events, Usage)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == counts
    assert events[-1].reason == "stop"


def test_anthropic_cache_writes_count_as_input_too(scripted, make_adapter):
    written = b'"usage":{"cache_read_input_tokens":20,"cache_creation_input_tokens":300,'
    frames = [
        f.replace(b'"usage":{"cache_read_input_tokens":20,', written)
        for f in rec.LLAMA_SERVER_ANTHROPIC_CACHED
    ]
    scripted.enqueue(Scenario.replay(frames))

    (usage,) = of_type(list(make_adapter("anthropic").stream(request())), Usage)

    assert (usage.input_tokens, usage.cached_input_tokens) == (321, 20)


# --- model lists: context size and capabilities -----------------------------------------------


@pytest.mark.parametrize("kind", ["openai_chat", "openai_responses"])
def test_llama_server_list_and_props_give_context_and_tools(scripted, make_adapter, kind):
    scripted.models_body = rec.LLAMA_SERVER_MODELS
    scripted.props = rec.LLAMA_SERVER_PROPS

    (model,) = make_adapter(kind).list_models()

    assert model.id == "llama-tool"
    assert (model.context_window, model.supports_tools, model.supports_vision) == (
        8192,
        True,
        False,
    )
    assert [r.path for r in scripted.listings] == ["/v1/models", "/props"]


def test_llama_server_without_props_still_gives_its_allocated_context(scripted, make_adapter):
    scripted.models_body = rec.LLAMA_SERVER_MODELS  # an older build: /props is a 404

    (model,) = make_adapter("openai_chat").list_models()

    assert (model.context_window, model.supports_tools) == (8192, None)  # n_ctx, not n_ctx_train


def test_other_servers_get_no_props_request(scripted, make_adapter):
    scripted.models = [{"id": "gpt-4o"}]
    make_adapter("openai_chat").list_models()
    assert [r.path for r in scripted.listings] == ["/v1/models"]


@pytest.mark.parametrize("kind", ["openai_chat", "openai_responses"])
def test_litellm_model_info_gives_context_and_claims_no_capabilities(scripted, make_adapter, kind):
    scripted.models_body = rec.LITELLM_MODELS

    (model,) = make_adapter(kind).list_models()

    # LiteLLM 1.108 sends no supports_* flags: what the model can do is Numi's own rule.
    assert (model.context_window, model.supports_tools, model.supports_vision) == (
        8192,
        None,
        None,
    )


def test_litellm_supports_flags_count_when_a_gateway_sends_them(scripted, make_adapter):
    # A gateway that does flag its models (OpenRouter-style lists, a LiteLLM config's
    # model_info): the flags win over any rule.
    scripted.models = [
        {"id": "llama-tool", "supports_function_calling": False, "supports_vision": True}
    ]

    (model,) = make_adapter("openai_chat").list_models()

    assert (model.supports_tools, model.supports_vision) == (False, True)


# --- retries behind a gateway -----------------------------------------------------------------


def litellm_429() -> Scenario:
    """LiteLLM's 429 as a gateway that says when to come back would send it."""
    return Scenario.http_error(
        429,
        body=rec.LITELLM_RATE_LIMIT_BODY,
        headers={**rec.LITELLM_RATE_LIMIT_HEADERS, "retry-after": "1"},
    )


def test_litellm_retry_after_is_honoured(scripted, make_adapter):
    scripted.enqueue(litellm_429(), Scenario().text("Recovered."))
    adapter = make_adapter("openai_chat", retry=RetryPolicy(max_retries=2, max_total=5))

    stream = adapter.stream(request())
    events = list(stream)

    assert joined(events, TextDelta) == "Recovered."
    assert stream.waited == 1.0  # the server's Retry-After, not the backoff's 0.5 s
    assert len(scripted.requests) == 2


def test_a_retry_after_past_the_total_cap_is_reported_at_once(scripted, make_adapter):
    scripted.enqueue(litellm_429(), Scenario().text("Never asked."))
    adapter = make_adapter("openai_chat", retry=RetryPolicy(max_retries=2, max_total=0.5))

    events = list(adapter.stream(request()))

    (error,) = events
    assert isinstance(error, StreamError) and error.code == "rate_limited"
    assert error.retry_after == 1.0 and "Rate limit reached" in error.message
    assert len(scripted.requests) == 1


def test_backoffs_stop_at_the_total_cap():
    policy = RetryPolicy(max_retries=10, base_delay=1.0, max_delay=8.0, max_total=4.0)
    error = ProviderError("provider_unavailable", "down")

    waits, waited = [], 0.0
    while (wait := policy.delay(error, len(waits), waited)) is not None:
        waits.append(wait)
        waited += wait

    assert len(waits) == 2 and waited <= 4.0  # about 1 + 2; the next 4 would pass the cap


def test_max_retry_seconds_reaches_the_policy():
    from numi.providers import get_adapter

    adapter = get_adapter("openai_chat", "http://127.0.0.1:9/v1", None, max_retry_seconds=7)
    assert adapter.retry.max_total == 7
