"""Local servers as issue 44's run against llama-server and LiteLLM found them, replayed
by the scripted provider through the real SDKs (numi/testing/recordings.py names each
shape's source): think tags on every kind, a cut-off Responses answer that says
"completed", the Anthropic kind's model list from llama-server, a gateway's 429 without
Retry-After, and the "503 Loading model" of a server that has just started."""

from __future__ import annotations

import time

import pytest
from provider_test_support import joined, of_type, request

from numi.providers import Finish, ReasoningDelta, RetryPolicy, StreamError, TextDelta
from numi.testing import Scenario
from numi.testing import recordings as rec

# --- one think-tag reader for the three kinds -------------------------------------------------


@pytest.mark.parametrize(
    "kind, recording",
    [
        ("openai_chat", rec.LLAMA_SERVER_CHAT_SPLIT_THINK),
        ("openai_responses", rec.LLAMA_SERVER_RESPONSES_THINK),
        ("anthropic", rec.LLAMA_SERVER_ANTHROPIC_THINK),
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_think_tags_are_reasoning_on_every_kind(scripted, make_adapter, kind, recording):
    scripted.enqueue(Scenario.replay(recording))

    events = list(make_adapter(kind).stream(request(model="qwen3-0.6b")))

    assert joined(events, ReasoningDelta) == "The user said hi."
    assert joined(events, TextDelta) == "Hello there!"  # no tag is shown, nor sent back
    assert events[-1].reason == "stop"


def test_an_answer_that_only_mentions_the_tag_is_left_alone(scripted, make_adapter):
    scripted.enqueue(Scenario().text("Use <think> tags like this: <think>x</think>."))

    events = list(make_adapter("anthropic").stream(request()))

    assert joined(events, TextDelta) == "Use <think> tags like this: <think>x</think>."
    assert of_type(events, ReasoningDelta) == []


# --- a cut-off Responses answer ---------------------------------------------------------------


def test_llama_server_cut_off_responses_answer_is_length(scripted, make_adapter):
    # llama-server says "completed"; the output count reaching max_output_tokens says more.
    scripted.enqueue(Scenario.replay(rec.LLAMA_SERVER_RESPONSES_CUT_OFF))

    events = list(
        make_adapter("openai_responses").stream(request(model="qwen3-0.6b", max_tokens=4))
    )

    assert joined(events, TextDelta) == "Once upon a time"
    assert events[-1] == Finish("length", "max_output_tokens", None)


def test_a_completed_answer_under_its_limit_is_a_stop(scripted, make_adapter):
    scripted.enqueue(Scenario.replay(rec.LLAMA_SERVER_RESPONSES_CUT_OFF))

    events = list(
        make_adapter("openai_responses").stream(request(model="qwen3-0.6b", max_tokens=64))
    )

    assert events[-1] == Finish("stop", "completed", None)


# --- the Anthropic kind pointed at llama-server -----------------------------------------------


def test_anthropic_kind_reads_llama_server_list_and_props(scripted, make_adapter):
    scripted.models_body = rec.LLAMA_SERVER_MODELS
    scripted.props = rec.LLAMA_SERVER_PROPS

    (model,) = make_adapter("anthropic").list_models()

    assert model.id == "llama-tool"
    assert (model.context_window, model.supports_tools, model.supports_vision) == (
        8192,
        True,
        False,
    )
    assert [r.path for r in scripted.listings] == ["/v1/models", "/props"]


def test_anthropic_kind_learns_a_template_without_tools(scripted, make_adapter):
    scripted.models_body = rec.LLAMA_SERVER_MODELS.replace(b'"n_ctx":8192', b'"n_ctx":256')
    scripted.props = rec.LLAMA_SERVER_PROPS.replace(
        b'"supports_tool_calls":true,"supports_tools":true',
        b'"supports_tool_calls":false,"supports_tools":false',
    ).replace(b'"n_ctx":8192', b'"n_ctx":256')

    (model,) = make_adapter("anthropic").list_models()

    assert (model.context_window, model.supports_tools) == (256, False)


def test_anthropic_models_keep_their_own_shape(scripted, make_adapter):
    (model,) = [m for m in make_adapter("anthropic").list_models() if m.id == "scripted-model"]

    assert model.supports_tools is True
    assert [r.path for r in scripted.listings] == ["/v1/models"]  # no /props asked


# --- a gateway's 429 without Retry-After ------------------------------------------------------


def test_a_gateway_429_without_retry_after_is_retried_once(scripted, make_adapter):
    limited = Scenario.http_error(
        429, body=rec.LITELLM_RATE_LIMIT_BODY, headers=rec.LITELLM_RATE_LIMIT_HEADERS
    )
    scripted.enqueue(limited, limited, limited, Scenario().text("Never asked."))
    adapter = make_adapter("openai_chat", retry=RetryPolicy(max_retries=2, base_delay=0.01))

    events = list(adapter.stream(request()))

    (error,) = events
    assert isinstance(error, StreamError) and error.code == "rate_limited"
    assert "Rate limit reached" in error.message
    assert len(scripted.requests) == 2  # the first and one retry, not three


def test_other_failures_keep_their_retries(scripted, make_adapter):
    down = Scenario.http_error(502)
    scripted.enqueue(down, down, Scenario().text("Back."))
    adapter = make_adapter("openai_chat", retry=RetryPolicy(max_retries=2, base_delay=0.01))

    assert joined(list(adapter.stream(request())), TextDelta) == "Back."
    assert len(scripted.requests) == 3


# --- "503 Loading model" right after llama-server starts --------------------------------------


def loading() -> Scenario:
    return Scenario.http_error(503, body=rec.LLAMA_SERVER_LOADING)


def test_a_loading_model_is_waited_for(scripted, make_adapter):
    # Six polls while it loads: more than every retry allows, within the loading wait.
    scripted.enqueue(*[loading() for _ in range(6)], Scenario().text("Paris."))
    policy = RetryPolicy(max_retries=2, loading_poll=0.01, max_loading_wait=5.0)
    adapter = make_adapter("openai_chat", retry=policy)

    events = list(adapter.stream(request()))

    assert joined(events, TextDelta) == "Paris."
    assert len(scripted.requests) == 7


def test_a_model_that_never_finishes_loading_fails_at_the_deadline(scripted, make_adapter):
    scripted.enqueue(*[loading() for _ in range(40)])
    policy = RetryPolicy(max_retries=2, loading_poll=0.02, max_loading_wait=0.1)
    adapter = make_adapter("openai_chat", retry=policy)

    started = time.monotonic()
    stream = adapter.stream(request())
    events = list(stream)

    (error,) = events
    assert error.code == "provider_unavailable" and "still loading the model" in error.message
    assert stream.waited <= 0.1 and time.monotonic() - started < 5
    assert 2 <= len(scripted.requests) <= 6


def test_the_loading_wait_is_the_idle_deadline():
    from numi.providers import get_adapter

    adapter = get_adapter("openai_chat", "http://127.0.0.1:9/v1", None, idle_timeout=45)
    assert adapter.retry.max_loading_wait == 45
