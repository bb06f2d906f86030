"""The gateway's refusals, each drawn in the client protocol's own error shape.

A `GatewayError` is a NumiError with the field it is about (`param`) and, for a rate
limit, when to come back. `openai_error` and `anthropic_error` are the two bodies; the
stable code is in both (`error.code`), as OpenAI's API puts it and as an extra field of
Anthropic's `error` object (the SDK keeps unknown fields).
"""

from __future__ import annotations

from typing import Any

from ..errors import NumiError

# Anthropic's error types by HTTP status (PROTOCOLS §4.3).
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}
# OpenAI's error types by HTTP status (PROTOCOLS §4.2).
_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


class GatewayError(NumiError):
    """A refusal of a /v1 request: a stable code, a message, a status, the field."""

    def __init__(
        self,
        code: str,
        message: str,
        status: int = 400,
        *,
        param: str | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(code, message, status)
        self.param = param
        self.retry_after = retry_after


def bad_body(message: str, param: str | None = None) -> GatewayError:
    """A malformed body or a field of the wrong type."""
    return GatewayError("invalid_body", message, 400, param=param)


def openai_error(code: str, message: str, status: int, param: str | None = None) -> dict:
    """The body of an OpenAI API error."""
    return {
        "error": {
            "message": message,
            "type": _OPENAI_TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def anthropic_error(code: str, message: str, status: int, request_id: str = "") -> dict:
    """The body of an Anthropic API error (also the data of a mid-stream `error` event)."""
    body: dict[str, Any] = {
        "type": "error",
        "error": {
            "type": _ANTHROPIC_TYPES.get(
                status, "api_error" if status >= 500 else "invalid_request_error"
            ),
            "message": message,
            "code": code,
        },
    }
    if request_id:
        body["request_id"] = request_id
    return body


# How a provider's failure (numi.providers.errors codes) reaches a gateway client.
_PROVIDER_STATUS = {
    "rate_limited": 429,
    "context_overflow": 400,
    "bad_request": 400,
    "provider_timeout": 504,
    "provider_overloaded": 503,
}


def provider_status(code: str) -> int:
    """The HTTP status for a provider failure that every route of a chain ended with:
    the client's own mistakes stay 4xx, the rest is the upstream's (502)."""
    return _PROVIDER_STATUS.get(code, 502)
