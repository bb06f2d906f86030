"""The OpenAI SDK client and model listing shared by the Chat and Responses adapters."""

from __future__ import annotations

from typing import Any

import openai

from .base import ProviderAdapter
from .events import ModelInfo
from .model_lists import openai_model_info, with_llama_server_props


class OpenAIAdapterBase(ProviderAdapter):
    """Builds the `openai` client; lists models from GET {base}/models."""

    def _make_client(self) -> Any:
        return openai.OpenAI(
            base_url=self.base_url,
            default_query=self.default_query or None,
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
        listed = list(client.models.list())
        return with_llama_server_props(client, self.base_url, listed, openai_model_info)

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

    # --- embeddings and reranking (numi/knowledge) ------------------------------------------

    def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order (POST {base}/embeddings, which OpenAI, Ollama,
        llama.cpp's `--embeddings`, vLLM and LM Studio serve). Raises ProviderError."""
        try:
            result = self.client.embeddings.create(
                model=model, input=texts, encoding_format="float"
            )
        except Exception as exc:
            raise self.map_exception(exc) from exc
        rows = sorted(result.data, key=lambda row: row.index)
        return [list(row.embedding) for row in rows]

    def rerank(self, model: str, query: str, documents: list[str]) -> list[float]:
        """A relevance score per document, in order (POST {base}/rerank, llama.cpp's and
        Jina's shape: `{results: [{index, relevance_score}]}`). Raises ProviderError."""
        try:
            body = self.client.post(
                "/rerank",
                body={"model": model, "query": query, "documents": documents},
                cast_to=object,
            )
        except Exception as exc:
            raise self.map_exception(exc) from exc
        scores = [0.0] * len(documents)
        for row in (body or {}).get("results", []) if isinstance(body, dict) else []:
            index = row.get("index")
            if isinstance(index, int) and 0 <= index < len(documents):
                scores[index] = float(row.get("relevance_score", 0.0))
        return scores
