"""Error responses: JSON for the API, a fragment for HTMX, a page for a browser.

The user sees the error's message; the log keeps the detail; nobody sees a stack trace.
"""

from __future__ import annotations

import logging

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from ..errors import NumiError, first_line, is_storage_failure, storage_unavailable
from .request_kind import is_htmx

log = logging.getLogger(__name__)


HTTP_CODES = {
    400: "bad_request",
    401: "auth_required",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
}


def init_app(app: Flask) -> None:
    app.register_error_handler(NumiError, _numi_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)


def wants_json() -> bool:
    return request.path.startswith("/api/") or (
        request.accept_mimetypes.best == "application/json" and not is_htmx()
    )


def error_response(code: str, message: str, status: int):
    if wants_json():
        return jsonify(error={"code": code, "message": message}), status
    if is_htmx():
        response = render_template(
            "partials/_toast.html", code=code, message=message, status=status
        )
        return response, status, {"HX-Retarget": "#toasts", "HX-Reswap": "beforeend"}
    return render_template("error.html", code=code, message=message, status=status), status


def _numi_error(exc: NumiError):
    return error_response(exc.code, exc.message, exc.status)


def _http_error(exc: HTTPException):
    code = HTTP_CODES.get(exc.code or 500, "http_error")
    message = {
        404: "Not found.",
        405: "Method not allowed.",
        413: "The request is too large.",
    }.get(exc.code or 500, exc.description or exc.name)
    return error_response(code, message, exc.code or 500)


def _unexpected(exc: Exception):
    if is_storage_failure(exc):
        # An outage, not a bug: one line in the log, a clear 503 for the client.
        log.error("storage unavailable on %s %s: %s", request.method, request.path, first_line(exc))
        return _numi_error(storage_unavailable())
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(
        "internal_error", "Something went wrong on the server. The log has the details.", 500
    )
