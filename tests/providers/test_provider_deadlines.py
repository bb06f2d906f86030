"""A model silent before its first token (issue 35): the response head and the first
output each have a deadline of their own, and a model cut by either is not asked again
(the turn's next route answers at once). The scripted provider holds back its headers or
its first token; the real SDKs read it, on all three protocols."""

from __future__ import annotations

from provider_test_support import joined, request

from numi.providers import Finish, RetryPolicy, StreamError, TextDelta
from numi.testing import Scenario

# Retries on: a deadline that is not retried must say so itself.
RETRIES = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)


def final(adapter):
    events = list(adapter.stream(request()))
    return events[-1], events


def test_a_server_that_never_sends_its_headers_is_cut_and_not_asked_again(
    scripted, make_adapter, kind
):
    scripted.enqueue(Scenario().hold_headers().text("too late"), Scenario().text("never asked"))

    error, events = final(make_adapter(kind, retry=RETRIES, headers_timeout=0.3))

    assert isinstance(error, StreamError) and error.code == "provider_timeout", events
    assert "headers within 0.3 seconds" in error.message and not error.after_output
    assert len(scripted.requests) == 1
    # The client hung up: the held request ended on the server too.
    assert scripted.requests[0].finished.wait(5)


def test_a_model_silent_before_its_first_token_is_cut_and_not_asked_again(
    scripted, make_adapter, kind
):
    # Headers and start events arrive, keep-alive comments keep the socket busy, no token.
    scripted.enqueue(Scenario().keep_alive(0.02).text("too late"), Scenario().text("never"))

    error, events = final(make_adapter(kind, retry=RETRIES, first_token_timeout=0.3))

    assert isinstance(error, StreamError) and error.code == "provider_timeout", events
    assert "output within 0.3 seconds" in error.message and not error.after_output
    assert len(scripted.requests) == 1


def test_a_slow_stream_after_its_first_token_keeps_going(scripted, make_adapter, kind):
    # The first-token deadline ends with the first token; the head's deadline with the
    # head: the body's reads keep the stream's own read timeout.
    # Each gap between tokens is longer than the head's deadline.
    scripted.enqueue(Scenario().text("one two three", chunks=3).delay(0.6))

    end, events = final(
        make_adapter(kind, retry=RETRIES, first_token_timeout=1.5, headers_timeout=0.4)
    )

    assert isinstance(end, Finish), events
    assert joined(events, TextDelta) == "one two three"
