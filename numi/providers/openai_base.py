"""The OpenAI SDK client and model listing shared by the Chat and Responses adapters."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai

from .base import ProviderAdapter
from .events import ModelInfo
from .model_lists import openai_model_info, with_llama_server_props
from .sse import SSEStream

# Headers of a sent request that belong to its body or to that one request alone.
_PER_REQUEST = frozenset(("content-length", "idempotency-key", "x-stainless-raw-response"))


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

    def _open_stream(
        self, client: Any, body: dict[str, Any], send_through_sdk: Callable[[], Any]
    ) -> SSEStream:
        """Send a streaming request whose JSON `body` (without `stream`) is the whole
        wire format. The first one goes through the SDK (`send_through_sdk`), which
        builds its URL and headers: options, param transforms, auth layers, the
        response wrapper, about 1 ms of CPU per turn (issue 45). What it sent is kept
        per adapter, that is per route, and later requests are that URL and those
        headers with their own body, sent on the SDK's own httpx2 client, with the
        SDK's failures: its status error (body read) for a non-2xx answer,
        APITimeoutError / APIConnectionError for a request that did not get one."""
        head = self._stream_head
        if head is None:
            stream = SSEStream.open(send_through_sdk())
            sent = stream.response.request
            headers = [(k, v) for k, v in sent.headers.items() if k.lower() not in _PER_REQUEST]
            self._stream_head = (sent.url, headers)
            return stream
        url, headers = head
        http = client._client
        request = http.build_request(
            "POST",
            url,
            headers=headers,
            content=json.dumps({**body, "stream": True}).encode(),
            timeout=client.timeout,
        )
        try:
            response = http.send(request, stream=True)
        except openai.APIError:
            raise
        except httpx2.TimeoutException as exc:  # as the SDK's own send maps them
            raise openai.APITimeoutError(request=request) from exc
        except Exception as exc:
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            try:
                response.read()
            finally:
                response.close()
            raise client._make_status_error_from_response(response)
        return SSEStream(_Streaming(response))

    _stream_head: tuple[Any, list[tuple[str, str]]] | None = None

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


class _Streaming:
    """An open 2xx answer as sse.SSEStream reads the SDK's streaming response."""

    def __init__(self, http_response: Any) -> None:
        self.http_response = http_response

    def iter_bytes(self) -> Any:
        return self.http_response.iter_bytes()

    def close(self) -> None:
        self.http_response.close()
