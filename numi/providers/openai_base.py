"""The OpenAI SDK client and model listing shared by the Chat and Responses adapters."""

from __future__ import annotations

from typing import Any

from .base import ProviderAdapter
from .events import ModelInfo


class OpenAIAdapterBase(ProviderAdapter):
    """Builds the `openai` client; lists models from GET {base}/models."""

    def _make_client(self) -> Any:
        import openai

        return openai.OpenAI(
            base_url=self.base_url,
            # Local servers (Ollama, llama.cpp) need no key, but the SDK refuses to build
            # without one.
            api_key=self.api_key or "no-key",
            timeout=self.sdk_timeout(),
            max_retries=0,  # retries happen in ProviderStream, before any output
            http_client=self.http_client(openai),
        )

    @property
    def is_openai_proper(self) -> bool:
        return "api.openai.com" in self.base_url

    def _list_models(self, client: Any) -> list[ModelInfo]:
        return [openai_model_info(model) for model in client.models.list()]

    # --- audio (OpenAI's /audio routes, which OpenAI-compatible servers copy) ------------

    def transcribe(self, model: str, filename: str, data: bytes, content_type: str) -> str:
        """The text of an audio recording (POST {base}/audio/transcriptions). Raises
        ProviderError."""
        try:
            result = self.client.audio.transcriptions.create(
                model=model, file=(filename, data, content_type), response_format="json"
            )
        except Exception as exc:
            raise self.map_exception(exc) from exc
        return getattr(result, "text", None) or ""

    def speak(self, model: str, voice: str, text: str) -> tuple[bytes, str]:
        """Speech for `text` (POST {base}/audio/speech): the audio and its content type.
        Raises ProviderError."""
        try:
            response = self.client.audio.speech.create(model=model, voice=voice, input=text)
        except Exception as exc:
            raise self.map_exception(exc) from exc
        return response.content, response.response.headers.get("content-type", "audio/mpeg")


def openai_model_info(model: Any) -> ModelInfo:
    """ModelInfo from an OpenAI-shaped model entry, reading the extras that
    OpenAI-compatible servers add (PROTOCOLS §5): OpenRouter `context_length`,
    `architecture.input_modalities`, `supported_parameters`; vLLM `max_model_len`;
    llama.cpp `meta.n_ctx`/`n_ctx_train`; LM Studio `max_context_length`."""
    extra: dict[str, Any] = model.model_extra or {}
    meta = extra.get("meta") if isinstance(extra.get("meta"), dict) else {}
    context = (
        extra.get("context_length")
        or extra.get("context_window")
        or extra.get("max_model_len")
        or extra.get("max_context_length")
        or meta.get("n_ctx")
        or meta.get("n_ctx_train")
    )
    vision = tools = reasoning = None
    architecture = extra.get("architecture")
    if isinstance(architecture, dict) and isinstance(architecture.get("input_modalities"), list):
        vision = "image" in architecture["input_modalities"]
    parameters = extra.get("supported_parameters")
    if isinstance(parameters, list):
        tools = "tools" in parameters
        reasoning = "reasoning" in parameters or "include_reasoning" in parameters
    capabilities = extra.get("capabilities")
    if isinstance(capabilities, list):  # Ollama-style ["completion", "vision", "tools", "thinking"]
        vision = "vision" in capabilities
        tools = "tools" in capabilities
        reasoning = "thinking" in capabilities
    return ModelInfo(
        id=model.id,
        display_name=extra.get("name") if isinstance(extra.get("name"), str) else None,
        context_window=int(context) if isinstance(context, (int, float)) and context > 0 else None,
        supports_vision=vision,
        supports_tools=tools,
        supports_reasoning=reasoning,
    )
