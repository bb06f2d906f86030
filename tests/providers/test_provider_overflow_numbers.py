"""A context overflow carries the server's own numbers when it states them (issue 23 item
3): llama-server's `n_prompt_tokens`/`n_ctx` fields, the counts in vLLM's, OpenAI's and
Anthropic's messages. Through the real SDKs against the scripted provider's real bodies."""

from __future__ import annotations

import pytest
from provider_test_support import request

from numi.providers import RetryPolicy, StreamError
from numi.testing import LLAMA_CPP_CONTEXT_ERROR, VLLM_CONTEXT_ERROR, Scenario

NO_RETRY = RetryPolicy(max_retries=0)

# llama-server's body as issue 23 quotes it (`-c 256`, a prompt of 479 tokens).
LLAMA_SERVER_256 = {
    "error": {
        "code": 400,
        "message": "request (479 tokens) exceeds the available context size (256 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 479,
        "n_ctx": 256,
    }
}


def overflow_of(adapter) -> StreamError:
    error = list(adapter.stream(request()))[-1]
    assert isinstance(error, StreamError) and error.code == "context_overflow"
    return error


@pytest.mark.parametrize(
    "body, numbers",
    [
        (LLAMA_SERVER_256, (479, 256)),
        (LLAMA_CPP_CONTEXT_ERROR, (13392, 8192)),
        (VLLM_CONTEXT_ERROR, (140000, 131072)),
    ],
    ids=["llama-server -c 256", "llama.cpp", "vllm"],
)
def test_openai_compatible_servers_state_their_numbers(scripted, make_adapter, body, numbers):
    scripted.enqueue(Scenario.http_error(400, body=body))
    assert overflow_of(make_adapter("openai_chat", retry=NO_RETRY)).overflow == numbers


@pytest.mark.parametrize(
    "kind, numbers",
    [
        ("openai_chat", (130412, 128000)),
        ("openai_responses", None),  # "Your input exceeds the context window": no numbers
        ("anthropic", (208310, 200000)),
    ],
)
def test_each_protocols_own_overflow_message_gives_its_numbers(
    scripted, make_adapter, kind, numbers
):
    scripted.enqueue(Scenario.http_error(400, "context_length"))
    assert overflow_of(make_adapter(kind, retry=NO_RETRY)).overflow == numbers


def test_an_overflow_without_numbers_has_none(scripted, make_adapter):
    scripted.enqueue(
        Scenario.http_error(400, body={"error": {"message": "context window exceeded"}})
    )
    assert overflow_of(make_adapter("openai_chat", retry=NO_RETRY)).overflow is None
