"""Every failure ends the stream with one StreamError carrying a stable code."""

from __future__ import annotations

import socket

import pytest
from provider_test_support import joined, request

from numi.providers import Finish, RetryPolicy, StreamError, TextDelta
from numi.testing import LLAMA_CPP_CONTEXT_ERROR, VLLM_CONTEXT_ERROR, Scenario

NO_RETRY = RetryPolicy(max_retries=0)


def final(adapter):
    events = list(adapter.stream(request()))
    assert sum(isinstance(e, (Finish, StreamError)) for e in events) == 1
    return events[-1], events


@pytest.mark.parametrize(
    "scenario, code",
    [
        (Scenario.http_error(401), "provider_auth"),
        (Scenario.http_error(403, "auth"), "provider_auth"),
        (Scenario.http_error(400, "context_length"), "context_overflow"),
        (Scenario.http_error(400), "bad_request"),
        (Scenario.http_error(404), "model_not_found"),
        (Scenario.http_error(429, retry_after=7), "rate_limited"),
        (Scenario.http_error(500), "provider_unavailable"),
        (Scenario.http_error(529), "provider_unavailable"),
    ],
    ids=["401", "403", "400-context", "400", "404-model", "429", "500", "529"],
)
def test_http_errors_map_to_stable_codes(scripted, make_adapter, kind, scenario, code):
    scripted.enqueue(scenario)

    error, _ = final(make_adapter(kind, retry=NO_RETRY))

    assert isinstance(error, StreamError)
    assert error.code == code
    assert error.status == scenario.error.status
    assert not error.after_output
    assert "test-key" not in error.message
    if code == "rate_limited":
        assert error.retry_after == 7


@pytest.mark.parametrize(
    "body", [LLAMA_CPP_CONTEXT_ERROR, VLLM_CONTEXT_ERROR], ids=["llama.cpp", "vllm"]
)
def test_context_overflow_in_compatible_servers_shapes(scripted, make_adapter, body):
    scripted.enqueue(Scenario.http_error(400, body=body))

    error, _ = final(make_adapter("openai_chat", retry=NO_RETRY))

    assert error.code == "context_overflow"


def test_html_error_pages_are_not_shown(scripted, make_adapter, kind):
    scripted.enqueue(
        Scenario.http_error(
            502, body="<html><body><h1>502 Bad Gateway</h1><script>x</script></body></html>"
        )
    )

    error, _ = final(make_adapter(kind, retry=NO_RETRY))

    assert error.code == "provider_unavailable"
    assert "<" not in error.message and "502" in error.message


def test_rate_limit_is_retried_after_retry_after_then_succeeds(scripted, adapter):
    scripted.enqueue(Scenario.http_error(429, retry_after=0.01), Scenario().text("Recovered."))

    final_event, events = final(adapter)

    assert isinstance(final_event, Finish)
    assert joined(events, TextDelta) == "Recovered."
    assert len(scripted.requests) == 2


def test_server_errors_are_retried_with_backoff_up_to_the_limit(scripted, adapter):
    scripted.enqueue(
        *(Scenario.http_error(500) for _ in range(3)), Scenario().text("never reached")
    )

    error, _ = final(adapter)

    assert error.code == "provider_unavailable"
    assert len(scripted.requests) == 3  # one try + max_retries=2


def test_overloaded_is_retried_and_succeeds(scripted, adapter):
    scripted.enqueue(Scenario.http_error(529), Scenario().text("ok"))

    final_event, _ = final(adapter)

    assert isinstance(final_event, Finish)


def test_auth_errors_are_not_retried(scripted, adapter):
    scripted.enqueue(Scenario.http_error(401), Scenario().text("never"))

    error, _ = final(adapter)

    assert error.code == "provider_auth" and len(scripted.requests) == 1


def test_a_long_retry_after_is_reported_not_waited_for(scripted, adapter):
    scripted.enqueue(Scenario.http_error(429, retry_after=3600))

    error, _ = final(adapter)

    assert error.code == "rate_limited" and error.retry_after == 3600
    assert len(scripted.requests) == 1


def test_error_event_before_any_output_is_retried(scripted, adapter):
    # Anthropic sends overloaded_error as an event right after message_start.
    scripted.enqueue(Scenario().error_event("overloaded"), Scenario().text("Second try."))

    final_event, events = final(adapter)

    assert isinstance(final_event, Finish)
    assert joined(events, TextDelta) == "Second try."


def test_error_event_after_output_ends_the_stream_without_retry(scripted, adapter):
    scripted.enqueue(
        Scenario().text("Half an ans", chunks=2).error_event("server"), Scenario().text("never")
    )

    error, events = final(adapter)

    assert joined(events, TextDelta) == "Half an ans"
    assert error.code == "provider_unavailable" and error.after_output
    assert len(scripted.requests) == 1


def test_context_overflow_reported_inside_the_stream(scripted, make_adapter, kind):
    scripted.enqueue(Scenario().error_event("context_length"))

    error, _ = final(make_adapter(kind, retry=NO_RETRY))

    assert error.code == "context_overflow"


def test_dropped_connection_mid_stream_is_stream_interrupted(scripted, adapter):
    scripted.enqueue(Scenario().text("Partial answ", chunks=3).drop(), Scenario().text("never"))

    error, events = final(adapter)

    assert joined(events, TextDelta) == "Partial answ"
    assert error.code == "stream_interrupted" and error.after_output
    assert len(scripted.requests) == 1


def test_dropped_connection_before_output_is_retried(scripted, adapter):
    scripted.enqueue(Scenario().drop(), Scenario().text("Second try."))

    final_event, _ = final(adapter)

    assert isinstance(final_event, Finish)


def test_unreachable_url_names_no_address(make_adapter, kind):
    """Which ports answer is information: the message (shown to users) names neither the
    address nor the port."""
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("" if kind == "anthropic" else "/v1")

    error, _ = final(make_adapter(kind, base_url=url, retry=NO_RETRY))

    assert error.code == "provider_unavailable"
    assert "127.0.0.1" not in error.message and str(port) not in error.message


def test_a_stalled_stream_times_out_as_interrupted(scripted, make_adapter, kind):
    scripted.enqueue(Scenario().text("Start").stall())

    error, events = final(make_adapter(kind, timeout=0.3, retry=NO_RETRY))

    assert joined(events, TextDelta) == "Start"
    assert error.code == "stream_interrupted"


def test_a_stream_of_keep_alive_comments_ends_with_provider_timeout(scripted, make_adapter, kind):
    # Comments are bytes on the socket (the read timeout never fires) but no event.
    scripted.enqueue(Scenario().keep_alive(0.02))

    error, events = final(make_adapter(kind, retry=NO_RETRY, idle_timeout=0.3))

    assert isinstance(error, StreamError) and error.code == "provider_timeout"
    assert not error.after_output and events == [error]


def test_provider_timeout_is_retried_before_output_only(scripted, make_adapter):
    scripted.enqueue(Scenario().keep_alive(0.02))
    scripted.enqueue(Scenario().text("second try"))
    final_event, events = final(
        make_adapter(
            "openai_chat", retry=RetryPolicy(max_retries=1, base_delay=0.01), idle_timeout=0.3
        )
    )
    assert isinstance(final_event, Finish) and joined(events, TextDelta) == "second try"

    scripted.enqueue(Scenario().text("partial").keep_alive(0.02))
    scripted.enqueue(Scenario().text("never asked for"))
    error, events = final(
        make_adapter(
            "openai_chat", retry=RetryPolicy(max_retries=1, base_delay=0.01), idle_timeout=0.3
        )
    )
    assert error.code == "provider_timeout" and error.after_output
    assert joined(events, TextDelta) == "partial"
    assert len(scripted.requests) == 3


def test_a_plain_404_is_not_retried(scripted, adapter):
    # No API at the base URL (a web server's own 404 page): asking again cannot help.
    scripted.enqueue(Scenario.http_error(404, body="404 page not found"), Scenario().text("never"))

    error, _ = final(adapter)

    assert error.code == "provider_unavailable" and "base URL" in error.message
    assert len(scripted.requests) == 1
