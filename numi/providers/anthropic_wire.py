"""Anthropic's `POST /v1/messages` sent by Numi itself, without the anthropic SDK.

Why: `import anthropic` costs a server about 42 MiB of RSS for good (issue 45), and almost
all of it is types Numi never builds: the SDK's `__init__` imports `anthropic.types`,
which imports the 2,100 modules of `anthropic.types.beta` through the shared error types,
with no lazy path in the pinned SDK. A turn used the SDK only to send one JSON request
(the body was already Numi's own wire format, passed through `extra_body`) and to map
failures; the answer was already read by `sse.py` from the undecoded response. This
module does those two things with httpx2, which Numi's read path uses anyway, and lists
models (`GET /v1/models`, page after page as the SDK does), so an Anthropic endpoint
loads no SDK at all.

What stays identical to the SDK (anthropic 2.17.0, max_retries=0) and what the rest of
Numi relies on:
- the requests: the URL (base URL + `/v1/messages`, the endpoint's query kept), the
  credentials and version headers the SDK sends (`Authorization: Bearer <key>`,
  `anthropic-version`), JSON in and out, the body with `stream: true`;
- the HTTP client: the SDK's defaults (limits, redirects, TCP keep-alive) on the same fast
  body path (`transport.py`), the endpoint's transport (the address guard) when given;
- failures, raised under the SDK's class names, which `errors.from_sdk_exception` matches
  by name: a non-2xx answer is an `APIStatusError` with the body read (JSON or its text),
  an httpx2 timeout an `APITimeoutError`, any other failure to send an
  `APIConnectionError`, each `from` the HTTP client's exception, so the response-head
  deadline still finds the `ReadTimeout` under it. Retries stay in `ProviderStream`;
- a listed model reads as the SDK's entry did (`model_lists.py` reads either): its
  fields as attributes, nested objects too (`capabilities.image_input.supported`), and
  what the SDK's `ModelInfo` does not declare in `model_extra` (llama-server's `meta`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from .transport import wire_http_client

# The `anthropic-version` the pinned SDK sends (anthropic._constants.ANTHROPIC_API_VERSION);
# tests/providers/test_provider_anthropic_wire.py checks the two agree.
API_VERSION = "2026-10-21"
USER_AGENT = "Numi"


class APIError(Exception):
    """A failure to talk to the API; the base of the classes below, as in the SDK."""


class APIStatusError(APIError):
    """A non-2xx answer, its body read: parsed JSON, or its text when not JSON."""

    def __init__(self, response: httpx2.Response, body: Any) -> None:
        super().__init__(f"Error code: {response.status_code} - {body}")
        self.response = response
        self.status_code = response.status_code
        self.body = body


class APIConnectionError(APIError):
    """The request could not be sent or its answer's head not read."""


class APITimeoutError(APIConnectionError):
    """The HTTP client timed out (connect, or the response head)."""


class StreamingResponse:
    """An open 2xx streaming answer, as `sse.SSEStream` reads it (the shape of the SDK's
    `with_streaming_response` object): `http_response`, `iter_bytes()`, `close()`."""

    def __init__(self, http_response: httpx2.Response) -> None:
        self.http_response = http_response

    def iter_bytes(self) -> Any:
        return self.http_response.iter_bytes()

    def close(self) -> None:
        self.http_response.close()


class MessagesClient:
    """Sends streaming Messages requests to one endpoint."""

    def __init__(
        self,
        base_url: str,
        default_query: dict[str, str],
        api_key: str,
        timeout: httpx2.Timeout,
        transport: Any = None,
        headers_timeout: float | None = None,
    ) -> None:
        self.base_url = base_url
        self.url = f"{base_url}/v1/messages"
        self.query = default_query or None
        self.timeout = timeout
        self.headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Authorization": f"Bearer {api_key}",
            "anthropic-version": API_VERSION,
        }
        self.http = wire_http_client(transport, timeout, headers_timeout)

    def stream(self, body: dict[str, Any]) -> StreamingResponse:
        """Send `body` with `stream: true`; the open answer, or the SDK-named failure."""
        content = json.dumps({**body, "stream": True}).encode()
        request = self.http.build_request(
            "POST",
            self.url,
            params=self.query,
            headers=self.headers,
            content=content,
            timeout=self.timeout,
        )
        return StreamingResponse(self._send(request, stream=True))

    def get(self, url: str, cast_to: Any = object, params: dict[str, str] | None = None) -> Any:
        """GET `url` (absolute, or a path under the base URL) and its parsed JSON: the
        SDK client's `get(url, cast_to=object)`, which model_lists.py calls."""
        request = self.http.build_request(
            "GET",
            url if "://" in url else self.base_url + url,
            params={**(self.query or {}), **(params or {})} or None,
            headers=self.headers,
            timeout=self.timeout,
        )
        return self._send(request, stream=False).json()

    def _send(self, request: httpx2.Request, stream: bool) -> httpx2.Response:
        """A 2xx response, or the failure under the SDK's class name."""
        try:
            response = self.http.send(request, stream=stream)
        except httpx2.TimeoutException as exc:
            raise APITimeoutError("Request timed out.") from exc
        except Exception as exc:
            raise APIConnectionError("Connection error.") from exc
        if not response.is_success:
            raise _status_error(response)
        return response

    def models(self) -> list[ListedModel]:
        """Every model of `GET /v1/models`, following `has_more` and `last_id` as the
        SDK's pages do (a page without entries, or without `last_id`, is the last)."""
        listed: list[ListedModel] = []
        after: str | None = None
        while True:
            page = self.get("/v1/models", params={"after_id": after} if after else None)
            data = page.get("data") if isinstance(page, dict) else None
            entries = [entry for entry in data or [] if isinstance(entry, dict)]
            listed += [ListedModel(entry) for entry in entries]
            after = page.get("last_id") if isinstance(page, dict) else None
            if not entries or page.get("has_more") is False or not after:
                return listed

    def close(self) -> None:
        self.http.close()


# The fields the SDK's `ModelInfo` declares; the others of an entry are its `model_extra`.
_DECLARED = frozenset(
    (
        "id capabilities created_at deprecated_at display_name lifecycle line "
        "max_input_tokens max_tokens retires_at type"
    ).split()
)


class _Fields:
    """A JSON object read by attribute, as the SDK's constructed models are; a field the
    object lacks reads as None."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = self._fields.get(name)
        return _Fields(value) if isinstance(value, dict) else value


class ListedModel(_Fields):
    """One entry of a model list."""

    def __init__(self, fields: dict[str, Any]) -> None:
        super().__init__(fields)
        self.model_extra = {k: v for k, v in fields.items() if k not in _DECLARED}


def _status_error(response: httpx2.Response) -> APIStatusError:
    """The SDK's status error for a non-2xx answer: the body read, JSON when it parses."""
    try:
        response.read()
    except Exception:
        response.close()
        return APIStatusError(response, None)
    text = response.text.strip()
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    return APIStatusError(response, body)
