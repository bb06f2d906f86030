"""Model listing, the connection test, and capabilities."""

from __future__ import annotations

import socket
import sys

import pytest

from numi.providers import (
    ModelInfo,
    ProviderError,
    RetryPolicy,
    adapter_class,
    capabilities,
    get_adapter,
)

MODELS = [
    {"id": "llama3.2:latest", "owned_by": "library"},
    {"id": "qwen3-served", "max_model_len": 40960},
    {
        "id": "or/vision-model",
        "context_length": 200000,
        "architecture": {"input_modalities": ["text", "image"]},
        "supported_parameters": ["tools", "reasoning"],
    },
    {"id": "gguf-model", "meta": {"n_ctx_train": 8192}},
]
ANTHROPIC_MODELS = [
    {
        "id": "claude-test-4",
        "display_name": "Claude Test 4",
        "max_input_tokens": 200000,
        "max_tokens": 64000,
    },
]


def test_openai_compatible_model_list_reads_server_extras(scripted, make_adapter):
    scripted.models = MODELS

    models = {m.id: m for m in make_adapter("openai_chat").list_models()}

    # The llama.cpp entry (`meta`) makes the adapter ask /props too (a 404 here).
    assert [r.path for r in scripted.listings] == ["/v1/models", "/props"]
    assert models["llama3.2:latest"] == ModelInfo(id="llama3.2:latest")
    assert models["qwen3-served"].context_window == 40960  # vLLM
    assert models["gguf-model"].context_window == 8192  # llama.cpp
    vision = models["or/vision-model"]  # OpenRouter
    assert (
        vision.context_window,
        vision.supports_vision,
        vision.supports_tools,
        vision.supports_reasoning,
    ) == (200000, True, True, True)


def test_responses_kind_lists_models_the_same_way(scripted, make_adapter):
    scripted.models = MODELS
    assert [m.id for m in make_adapter("openai_responses").list_models()] == [
        m["id"] for m in MODELS
    ]


def test_anthropic_model_list(scripted, make_adapter):
    scripted.models = ANTHROPIC_MODELS

    (model,) = make_adapter("anthropic").list_models()

    assert "anthropic-version" in scripted.listings[-1].headers
    assert len(scripted.listings) == 1  # has_more: false, no second page
    assert (model.id, model.display_name, model.context_window, model.max_output_tokens) == (
        "claude-test-4",
        "Claude Test 4",
        200000,
        64000,
    )


def test_connection_test_success_message(scripted, make_adapter, kind):
    scripted.models = [{"id": "m1"}, {"id": "m2"}]

    message = make_adapter(kind).test_connection("m2")

    assert "2 models available" in message and "m2" in message


def test_connection_test_wrong_key(scripted, make_adapter, kind):
    scripted.api_key = "the-right-key"

    with pytest.raises(ProviderError) as caught:
        make_adapter(kind, api_key="sk-wrong-key-123").test_connection()

    assert caught.value.code == "provider_auth"
    assert "sk-wrong-key-123" not in caught.value.message


def test_connection_test_unreachable_url(make_adapter, kind):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"

    with pytest.raises(ProviderError) as caught:
        make_adapter(kind, base_url=url, retry=RetryPolicy(max_retries=0)).test_connection()

    assert caught.value.code == "provider_unavailable"
    assert "127.0.0.1" not in caught.value.message and str(port) not in caught.value.message


def test_connection_test_wrong_path_hints_at_v1(scripted, make_adapter):
    with pytest.raises(ProviderError) as caught:
        make_adapter("openai_chat", base_url=scripted.url + "/api").test_connection()

    assert caught.value.code == "provider_unavailable"
    assert "/v1" in caught.value.message


def test_connection_test_no_such_model(scripted, make_adapter, kind):
    scripted.models = [{"id": "llama3.2:latest"}]

    with pytest.raises(ProviderError) as caught:
        make_adapter(kind).test_connection("llama9")

    assert caught.value.code == "model_not_found"
    assert "llama9" in caught.value.message and "llama3.2:latest" in caught.value.message


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ProviderError) as caught:
        get_adapter("gemini_native", "http://127.0.0.1:1", None)
    assert caught.value.code == "bad_request" and "openai_chat" in caught.value.message


def test_capability_attributes_are_plain_class_attributes():
    cls = adapter_class("anthropic")
    assert cls.supports_tools is True and cls.supports_vision is True


def test_importing_providers_does_not_import_the_sdks():
    import subprocess

    code = (
        "import sys, numi.providers, numi.testing, numi.agent.prepare; "
        "print('openai' in sys.modules, 'anthropic' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False False"


# --- capabilities -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, vision, tools, reasoning",
    [
        ("gpt-4o-mini", True, True, False),
        ("gpt-4.1", True, True, False),
        ("gpt-5-mini", True, True, True),
        ("o3-mini", False, True, True),
        ("o4-mini", True, True, True),
        ("claude-3-5-haiku-latest", True, True, False),
        ("claude-sonnet-4-5", True, True, True),
        ("anthropic/claude-3.7-sonnet", True, True, True),
        ("llama3.2:latest", False, True, False),
        ("llama3.2-vision:11b", True, False, False),
        ("llava:13b", True, False, False),
        ("qwen2.5:7b", False, True, False),
        ("qwen3:8b", False, True, True),
        ("deepseek-r1:14b", False, False, True),
        ("deepseek-reasoner", False, True, True),
        ("gemma3:4b", True, False, False),
        ("mistral-nemo", False, True, False),
    ],
)
def test_known_families(model, vision, tools, reasoning):
    caps = capabilities(model)
    assert (caps.vision, caps.tools, caps.reasoning) == (vision, tools, reasoning)
    assert caps.sources["vision"] == "family"


def test_reported_capabilities_win_over_the_table_and_overrides_win_over_both():
    reported = ModelInfo(id="gemma3:4b", supports_vision=False, context_window=8192)

    caps = capabilities("gemma3:4b", reported, overrides={"tools": True})

    assert (caps.vision, caps.tools, caps.context_window) == (False, True, 8192)
    assert caps.sources == {
        "vision": "reported",
        "tools": "override",
        "reasoning": "family",
        "context_window": "reported",
    }


def test_unknown_models_get_defaults_marked_as_assumed():
    caps = capabilities("my-finetune-v2", defaults={"context_window": 16384})

    assert (caps.vision, caps.tools, caps.reasoning, caps.context_window) == (
        False,
        True,
        False,
        16384,
    )
    assert set(caps.sources.values()) == {"default"}
