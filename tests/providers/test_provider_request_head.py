"""An OpenAI-shaped adapter builds its streaming request through the SDK once (the first
of its route), then sends later ones with that request's URL and headers and their own
body (issue 45: the SDK's request building was about 1 ms of CPU per turn). A later
request must be what the SDK would have sent, and fail as the SDK's would have."""

from __future__ import annotations

import socket

import pytest
from provider_test_support import request, user

from numi.providers import RetryPolicy, StreamError, TextDelta
from numi.testing import Scenario

NO_RETRY = RetryPolicy(max_retries=0)
OPENAI_KINDS = ["openai_chat", "openai_responses"]


def warmed(scripted, make_adapter, kind, **options):
    """An adapter whose first request (through the SDK) is done."""
    adapter = make_adapter(kind, base_url=_base(scripted) + "?api-version=7", **options)
    scripted.enqueue(Scenario().text("first"))
    assert [e.text for e in adapter.stream(request(user("First"))) if isinstance(e, TextDelta)]
    return adapter


def _base(scripted):
    return scripted.openai_base_url


def outcome(adapter, question="Hi"):
    events = list(adapter.stream(request(user(question))))
    error = next((e for e in events if isinstance(e, StreamError)), None)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return text, error and (error.code, error.message, error.status, error.retry_after)


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_a_later_request_is_what_the_sdk_sends(scripted, make_adapter, kind):
    fresh = make_adapter(kind, base_url=_base(scripted) + "?api-version=7")
    scripted.enqueue(Scenario().text("ok"))
    assert outcome(fresh, "Second") == ("ok", None)
    by_sdk = scripted.last_request

    adapter = warmed(scripted, make_adapter, kind)
    scripted.enqueue(Scenario().text("ok"))
    assert outcome(adapter, "Second") == ("ok", None)
    by_head = scripted.last_request

    assert by_head.path == by_sdk.path and "api-version=7" in by_head.path
    assert by_head.body == by_sdk.body and by_head.body["stream"] is True
    for name in ("authorization", "content-type", "accept", "user-agent"):
        assert by_head.headers.get(name) == by_sdk.headers.get(name), name


@pytest.mark.parametrize("kind", OPENAI_KINDS)
@pytest.mark.parametrize(
    "scenario",
    [
        Scenario.http_error(401),
        Scenario.http_error(400, "context_length"),
        Scenario.http_error(404),
        Scenario.http_error(429, retry_after=7),
        Scenario.http_error(500),
        Scenario.http_error(502, body="<html>Bad gateway</html>"),
    ],
    ids=["401", "400-context", "404", "429", "500", "502-html"],
)
def test_a_later_request_fails_as_through_the_sdk(scripted, make_adapter, kind, scenario):
    scripted.enqueue(scenario)
    by_sdk = outcome(make_adapter(kind, retry=NO_RETRY))
    adapter = warmed(scripted, make_adapter, kind, retry=NO_RETRY)
    scripted.enqueue(scenario)

    assert outcome(adapter) == by_sdk
    assert by_sdk[1] is not None


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_a_later_request_to_a_closed_port_or_a_silent_server(scripted, make_adapter, kind):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    refused = outcome(make_adapter(kind, base_url=closed, retry=NO_RETRY))
    assert refused[1][0] == "provider_unavailable"

    # Warmed on the live server, then sent to the closed port: the same failure.
    adapter = warmed(scripted, make_adapter, kind, retry=NO_RETRY, headers_timeout=0.3)
    head_url, headers = adapter._stream_head
    adapter._stream_head = (head_url.copy_with(port=int(closed.rsplit(":")[-1][:-3])), headers)
    assert outcome(adapter) == refused

    # A server that never sends its response head: the head deadline, as for the SDK.
    silent = make_adapter(kind, retry=NO_RETRY, headers_timeout=0.3)
    adapter = warmed(scripted, make_adapter, kind, retry=NO_RETRY, headers_timeout=0.3)
    scripted.enqueue(*(Scenario().text("never").hold_headers() for _ in range(2)))
    by_sdk = outcome(silent)
    assert by_sdk[1][0] == "provider_timeout"
    assert outcome(adapter) == by_sdk
    scripted.release()
