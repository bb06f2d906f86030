"""Provider failures as stable codes with messages that are safe to show.

Codes (stable, used by the UI, the event protocol and fallbacks):

    provider_auth         wrong or missing key, no permission, billing/quota exhausted
    rate_limited          HTTP 429 (``retry_after`` in seconds when the provider said)
    context_overflow      the prompt does not fit the model's context window
    bad_request           the provider refused the request for another reason
    model_not_found       the endpoint does not serve that model
    provider_unavailable  unreachable URL, timeout, HTTP 5xx/529, overloaded
    stream_interrupted    the stream broke after it started (dropped connection,
                          an error event, or an end without a finish)

How failures reach callers:

- ``adapter.stream()`` never raises for a provider failure. It ends the stream with one
  ``StreamError`` event, before or during streaming (see ``numi.providers.events``).
- ``list_models()`` and ``test_connection()`` raise ``ProviderError``.

Messages never contain the API key (it is redacted) nor a non-JSON body (proxies answer
HTML error pages; we name the HTTP status instead).
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

CODES = (
    "provider_auth",
    "rate_limited",
    "context_overflow",
    "bad_request",
    "model_not_found",
    "provider_unavailable",
    "stream_interrupted",
    "provider_timeout",
)

# Failures worth another attempt, provided nothing has streamed yet.
RETRYABLE_CODES = frozenset(
    {"rate_limited", "provider_unavailable", "stream_interrupted", "provider_timeout"}
)

_MAX_MESSAGE = 300

# PROTOCOLS §4.5: the generic fallback, checked case-insensitively on the message/body.
_CONTEXT_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "exceed context limit",
    "exceeds the available context size",
    "exceed_context_size_error",
    "too many tokens",
)


class ProviderError(Exception):
    """A provider failure with a stable `code` and a human `message`."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        overflow: tuple[int | None, int | None] | None = None,
        retryable: bool | None = None,
        loading: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        # A context_overflow's own numbers, when the server gave them: (the prompt's
        # tokens, the context size), e.g. llama-server's n_prompt_tokens and n_ctx.
        self.overflow = overflow
        self._retryable = retryable
        # The server is up but still loading its model (llama-server's 503 right after it
        # starts): worth waiting for, not a failure (base.RetryPolicy).
        self.loading = loading

    @property
    def retryable(self) -> bool:
        """Worth another attempt: the code's rule, unless the failure said otherwise."""
        if self._retryable is not None:
            return self._retryable
        return self.code in RETRYABLE_CODES

    def __repr__(self) -> str:
        return f"ProviderError({self.code!r}, {self.message!r}, status={self.status})"


def is_context_overflow(status: int | None, text: str) -> bool:
    """True when an error body or message says the prompt exceeds the context window."""
    if status == 429:  # "too many tokens" per minute is a rate limit, not the context
        return False
    lowered = text.lower()
    return any(marker in lowered for marker in _CONTEXT_OVERFLOW_MARKERS)


# How servers state a refused prompt's size and their window in the message text:
# (regex, group of the prompt tokens, group of the window), first match wins.
_OVERFLOW_NUMBERS = (
    # llama-server: "request (13392 tokens) exceeds the available context size (8192 tokens)"
    (
        re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens"),
        1,
        2,
    ),
    # OpenAI / vLLM: "maximum context length is 128000 tokens. However, your messages
    # resulted in 130412 tokens" / "However, you requested 140000 tokens"
    (
        re.compile(
            r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens"
        ),
        2,
        1,
    ),
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    (re.compile(r"prompt is too long: (\d+) tokens > (\d+)"), 1, 2),
)


def overflow_numbers(body: Any, message: str) -> tuple[int | None, int | None] | None:
    """(prompt tokens, context size) of a context-overflow answer: llama-server's
    `n_prompt_tokens`/`n_ctx` fields, else the numbers in the message; None without any."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    inner = body.get("error") if isinstance(body, dict) else None
    inner = inner if isinstance(inner, dict) else body if isinstance(body, dict) else {}

    def count(value: Any) -> int | None:
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    prompt, window = count(inner.get("n_prompt_tokens")), count(inner.get("n_ctx"))
    if prompt or window:
        return prompt, window
    for pattern, prompt_group, window_group in _OVERFLOW_NUMBERS:
        match = pattern.search(message or "")
        if match:
            return int(match.group(prompt_group)), int(match.group(window_group))
    return None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def is_loading_model(message: str) -> bool:
    """llama-server's answer while it loads its model, for every route but /health:
    HTTP 503 `{"error": {"code": 503, "message": "Loading model", "type":
    "unavailable_error"}}`."""
    return message.strip().lower().startswith("loading model")


def error_detail(body: Any) -> tuple[str, str, str]:
    """(message, type, code) from any provider's JSON error body (OpenAI, Anthropic,
    llama.cpp, vLLM, OpenRouter shapes), or empty strings."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return "", "", ""
    if not isinstance(body, dict):
        return "", "", ""
    error = body.get("error")
    inner: dict[str, Any] = error if isinstance(error, dict) else body
    message = inner.get("message") or ""
    if not isinstance(message, str):
        message = json.dumps(message)
    kind = inner.get("type") or ""
    code = inner.get("code") or ""
    return message, str(kind), str(code)


def from_http_status(
    status: int,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    base_url: str = "",
    api_key: str | None = None,
) -> ProviderError:
    """Map an HTTP error answer (before streaming) to a ProviderError."""
    message, kind, code = error_detail(body)
    message = safe_message(message, api_key)
    detail = f": {message}" if message else ""
    retry_after = parse_retry_after(headers)

    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return ProviderError(
            "provider_auth",
            f"The provider rejected the API key (HTTP {status}){detail}",
            status=status,
        )
    if status == 402 or code == "insufficient_quota" or kind == "billing_error":
        # Billing, not a rate limit: waiting will not help.
        return ProviderError(
            "provider_auth", f"The account has no quota left (HTTP {status}){detail}", status=status
        )
    if status == 429:
        return ProviderError(
            "rate_limited",
            f"The provider is rate limiting requests (HTTP 429){detail}",
            status=status,
            retry_after=retry_after,
        )
    if status == 404:
        if "model" in message.lower() or code == "model_not_found":
            return ProviderError("model_not_found", f"No such model{detail}", status=status)
        return ProviderError(
            "provider_unavailable",
            "No API found at the endpoint's base URL (HTTP 404). Check the base URL"
            " (OpenAI-compatible servers usually end in /v1).",
            status=status,
            # A wrong base URL stays wrong: asking again only delays the error.
            retryable=False,
        )
    if status == 413 or (
        status in (400, 422) and is_context_overflow(status, f"{message} {kind} {code}")
    ):
        return ProviderError(
            "context_overflow",
            f"The conversation is too long for this model's context window{detail}",
            status=status,
            overflow=overflow_numbers(body, message),
        )
    if 400 <= status < 500 and status not in (408, 409):
        return ProviderError(
            "bad_request",
            f"The provider refused the request (HTTP {status}){detail}",
            status=status,
        )
    if status == 503 and is_loading_model(message):
        return ProviderError(
            "provider_unavailable",
            f"The server is still loading the model (HTTP 503){detail}",
            status=status,
            retry_after=retry_after,
            loading=True,
        )
    if status == 529 or kind == "overloaded_error":
        reason = "is overloaded"
    elif status >= 500:
        reason = "had an internal error"
    else:
        reason = "did not answer in time"
    return ProviderError(
        "provider_unavailable",
        f"The provider {reason} (HTTP {status}){detail}",
        status=status,
        retry_after=retry_after,
    )


def from_stream_error(body: Any, *, api_key: str | None = None) -> ProviderError:
    """Map an error that arrived inside a 200 stream (an SSE error event) to a code."""
    message, kind, code = error_detail(body)
    text = f"{message} {kind} {code}"
    message = safe_message(message, api_key) or "The provider reported an error mid-stream"
    if is_context_overflow(None, text):
        return ProviderError(
            "context_overflow",
            f"The conversation is too long for this model's context window: {message}",
            overflow=overflow_numbers(body, message),
        )
    if "rate_limit" in text.lower():
        return ProviderError("rate_limited", f"Rate limited mid-stream: {message}")
    if kind in ("overloaded_error", "api_error", "server_error") or code in ("server_error",):
        return ProviderError("provider_unavailable", f"The provider failed mid-stream: {message}")
    return ProviderError("stream_interrupted", f"The stream was interrupted: {message}")


def unreachable(base_url: str, *, timed_out: bool = False) -> ProviderError:
    # The message names no URL, address or port: it is shown to users, who may not be the
    # ones who set the endpoint up, and which ports answer is itself information.
    if timed_out:
        return ProviderError("provider_unavailable", "The endpoint did not answer in time.")
    return ProviderError(
        "provider_unavailable", "Could not connect to the endpoint. Is the server running?"
    )


def interrupted(reason: str = "the connection closed before the answer finished") -> ProviderError:
    return ProviderError("stream_interrupted", f"The stream was interrupted: {reason}")


def safe_message(message: str, api_key: str | None = None) -> str:
    """Trim a provider message for display: no API key, no markup, bounded length."""
    if not message:
        return ""
    if api_key and len(api_key) >= 4:
        message = message.replace(api_key, "[redacted]")
    if re.search(r"<\s*(html|body|head|!doctype)", message, re.IGNORECASE):
        return ""
    message = " ".join(message.split())
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    return message


def from_sdk_exception(
    exc: BaseException, *, base_url: str, api_key: str | None, streaming: bool = False
) -> ProviderError:
    """Map an exception raised by the openai or anthropic SDK (or their HTTP client,
    httpx2) to a ProviderError. With `streaming` (the 200 had arrived), connection
    trouble and timeouts mean the stream broke: stream_interrupted.

    Matched by class name so this module needs neither SDK imported; both SDKs use the
    same names (APIStatusError, APIConnectionError, APITimeoutError, APIError).
    """
    if isinstance(exc, ProviderError):
        return exc
    names = {cls.__name__ for cls in type(exc).__mro__}
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None)
    if "APIStatusError" in names and status is not None:
        if status == 200:
            # The anthropic SDK raises an `event: error` inside a stream as a status error.
            return from_stream_error(getattr(exc, "body", None), api_key=api_key)
        body = _response_body(response, getattr(exc, "body", None))
        headers = getattr(response, "headers", None)
        return from_http_status(status, body, headers=headers, base_url=base_url, api_key=api_key)
    if "APITimeoutError" in names or "TimeoutException" in names:
        if streaming:
            return interrupted("no data from the provider in time")
        return unreachable(base_url, timed_out=True)
    if "APIConnectionError" in names or "ConnectError" in names:
        return interrupted() if streaming else unreachable(base_url)
    if "APIError" in names:
        # openai: a `data: {"error": ...}` frame inside a 200 stream.
        return from_stream_error(
            {"error": getattr(exc, "body", None) or {"message": str(exc)}}, api_key=api_key
        )
    if names & {
        "RemoteProtocolError",
        "ReadError",
        "NetworkError",
        "TransportError",
        "StreamError",
    }:
        return interrupted()
    return ProviderError("stream_interrupted", "Unexpected error while talking to the provider")


def _response_body(response: Any, fallback: Any) -> Any:
    """The whole JSON body when readable (Anthropic keeps `type` at the top level, and the
    openai SDK hands over only the inner `error`), else the SDK's parsed body."""
    if response is not None:
        try:
            return response.json()
        except Exception:  # not JSON (an HTML error page) or not read
            try:
                text = response.text
            except Exception:
                text = ""
            return fallback if fallback not in (None, text) else ""
    return fallback
