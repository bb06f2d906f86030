"""/v1: the OpenAI and Anthropic APIs, served to clients that hold a Numi API key.

GET  /v1/models                 the names this key may use (OpenAI's list, or Anthropic's
                                when the request carries `anthropic-version`)
GET  /v1/models/<name>          one of them
POST /v1/chat/completions       OpenAI Chat Completions, streaming or not
POST /v1/responses              OpenAI Responses, streaming or not (stateless: store false)
POST /v1/messages               Anthropic Messages, streaming or not

Only an API key opens /v1 (`Authorization: Bearer` or `x-api-key`): no session cookie,
access token or /api token does, and no other route takes a key (security._identify
leaves /v1 to this module). CORS is off unless NUMI_API_CORS_ORIGINS names origins.
Every refusal is drawn in the protocol's own error shape with a stable `code`, and
changes nothing. The request's database transaction ends before the provider streams;
usage and the kept chat are written in one short transaction once the answer ended.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import gevent
from gevent.queue import Queue

from flask import (
    Blueprint,
    Response,
    current_app,
    g,
    jsonify,
    request,
    stream_with_context,
)
from werkzeug.exceptions import HTTPException

from ..errors import NumiError, is_storage_failure
from ..extensions import db
from ..gateway.errors import GatewayError, anthropic_error, bad_body, openai_error, provider_status
from ..gateway.keys import KEY_PREFIX, authenticate, require_use
from ..identity import bearer_token
from ..lazy_modules import lazy_module
from ..providers.events import ReasoningDelta, StreamEvent, TextDelta
from ..services import services

# The gateway's request handling is loaded by the first /v1 call, not at start-up.
if TYPE_CHECKING:
    from ..gateway import inbound, models as gateway_models, outbound, relay as relays
    from ..gateway import responses, spending, threads
else:
    inbound = lazy_module("numi.gateway.inbound")
    gateway_models = lazy_module("numi.gateway.models")
    outbound = lazy_module("numi.gateway.outbound")
    relays = lazy_module("numi.gateway.relay")
    responses = lazy_module("numi.gateway.responses")
    spending = lazy_module("numi.gateway.spending")
    threads = lazy_module("numi.gateway.threads")

log = logging.getLogger(__name__)

bp = Blueprint("gateway", __name__, url_prefix="/v1")


def _protocol() -> str:
    """Whose error shape this request gets: Anthropic's for /v1/messages and for
    requests that say `anthropic-version`, else OpenAI's."""
    if request.path.startswith("/v1/messages") or "anthropic-version" in request.headers:
        return "anthropic"
    return "openai"


def _error(code: str, message: str, status: int, param: str | None = None, retry_after=None):
    if _protocol() == "anthropic":
        body = anthropic_error(code, message, status)
    else:
        body = openai_error(code, message, status, param)
    response = jsonify(body)
    response.status_code = status
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return _cors(response)


@bp.errorhandler(GatewayError)
def _gateway_error(exc: GatewayError):
    return _error(exc.code, exc.message, exc.status, exc.param, exc.retry_after)


@bp.errorhandler(NumiError)
def _numi_error(exc: NumiError):
    return _error(exc.code, exc.message, exc.status)


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    if exc.code == 413:
        return _error("body_too_large", "The request body is too large.", 413)
    if exc.code == 405:
        return _error("method_not_allowed", "Method not allowed.", 405)
    return _error("unknown_route", f"Numi serves no {request.path}.", exc.code or 404)


@bp.errorhandler(Exception)
def _unexpected(exc: Exception):
    if is_storage_failure(exc):
        return _error("storage_unavailable", "The database is unavailable; try again.", 503)
    log.exception("unhandled error on %s %s", request.method, request.path)
    return _error("internal_error", "Something went wrong on the server.", 500)


def _cors(response: Response) -> Response:
    origin = request.headers.get("Origin")
    if origin and origin.lower() in current_app.config["NUMI_API_CORS_ORIGINS"]:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Headers"] = (
            "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta"
        )
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
        response.headers["Access-Control-Expose-Headers"] = "X-Numi-Model, X-Numi-Fallback"
        response.vary.add("Origin")
    return response


@bp.before_request
def _authorize():
    if request.method == "OPTIONS":
        return _cors(Response(status=204))  # a preflight carries no key
    limit = current_app.config["NUMI_API_MAX_BODY_BYTES"]
    if (request.content_length or 0) > limit:
        raise GatewayError(
            "body_too_large", f"A /v1 request body may be at most {limit} bytes.", 413
        )
    given = [
        request.headers.get("x-api-key"),
        bearer_token(request.headers.get("Authorization", "")),
    ]
    # A client may send both (a proxy adds its own Authorization): the Numi key counts.
    secret = next((s for s in given if s and s.startswith(KEY_PREFIX)), None) or next(
        (s for s in given if s), None
    )
    g.api_key = authenticate(secret)
    services().api_windows.admit(g.api_key.id)
    require_use(g.api_key, "chat", "ask models through /v1")
    return None


@bp.after_request
def _after(response: Response) -> Response:
    return _cors(response)


# --- models ---------------------------------------------------------------------------------


@bp.get("/models")
def models():
    names = gateway_models.listed_models(g.api_key.user_id, g.api_key)
    if _protocol() == "anthropic":
        data = [_anthropic_model(*name) for name in names]
        return jsonify(
            data=data,
            has_more=False,
            first_id=data[0]["id"] if data else None,
            last_id=data[-1]["id"] if data else None,
        )
    return jsonify(object="list", data=[_openai_model(*name) for name in names])


@bp.get("/models/<path:name>")
def model(name: str):
    found = next(
        (n for n in gateway_models.listed_models(g.api_key.user_id, g.api_key) if n[0] == name),
        None,
    )
    if found is None:
        raise gateway_models.unknown_model(name)
    return jsonify(
        _anthropic_model(*found) if _protocol() == "anthropic" else _openai_model(*found)
    )


def _openai_model(name: str, owner: str, _display: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": owner}


def _anthropic_model(name: str, _owner: str, display: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": name,
        "display_name": display,
        "created_at": "1970-01-01T00:00:00Z",
    }


# --- answers ---------------------------------------------------------------------------------


def _body() -> Any:
    try:
        return json.loads(request.get_data(cache=False) or b"null")
    except ValueError:
        raise bad_body("The body is not valid JSON.") from None


@bp.post("/chat/completions")
def chat_completions():
    max_messages = current_app.config["NUMI_API_MAX_MESSAGES"]
    return _answer(inbound.chat_completions(_body(), max_messages=max_messages))


@bp.post("/responses")
def responses_route():
    max_messages = current_app.config["NUMI_API_MAX_MESSAGES"]
    return _answer(responses.read(_body(), max_messages=max_messages))


@bp.post("/messages")
def messages():
    max_messages = current_app.config["NUMI_API_MAX_MESSAGES"]
    return _answer(inbound.anthropic_messages(_body(), max_messages=max_messages))


def _ascii(text: str) -> str:
    """A header value: HTTP headers carry Latin-1, names may not."""
    return text.encode("ascii", "replace").decode().replace("\n", " ")[:500]


def _answer(call: inbound.GatewayCall):
    grant = g.api_key
    resolved = gateway_models.resolve(grant.user_id, grant, call.model)
    gateway_models.add_project_documents(grant.user_id, resolved, call.question)
    relay = relays.Relay(current_app._get_current_object(), call, resolved)
    relay.check_size()
    budgets = spending.CallBudgets(grant.user_id, resolved.project_id)
    output = call.max_tokens or current_app.config["NUMI_BUDGET_OUTPUT_TOKENS"]
    resolved.routes = budgets.reserve(resolved.routes, (relays.estimate_tokens(call), output))
    # Nothing of the database is held while the provider streams (routes are values).
    db.session.close()
    try:
        route = relay.open()
    except BaseException:
        budgets.settle(relay.answer)  # nothing answered: the reservation is given back
        raise
    answered_by = f"{route.endpoint_name}/{route.model}"
    headers = {"X-Numi-Model": _ascii(answered_by)}
    if relay.fallback is not None:
        headers["X-Numi-Fallback"] = _ascii(relay.fallback.text())
    writer: outbound.ChatCompletionsWriter | outbound.MessagesWriter | responses.ResponsesWriter
    if call.protocol == "openai_chat":
        writer = outbound.ChatCompletionsWriter(answered_by, call.include_usage)
    elif call.protocol == "openai_responses":
        writer = responses.ResponsesWriter(answered_by)
    else:
        writer = outbound.MessagesWriter(answered_by)

    def record() -> None:
        budgets.settle(relay.answer)
        try:
            threads.record(
                user_id=grant.user_id,
                key_id=grant.id,
                key_name=grant.name,
                keep=grant.keep,
                call=call,
                answer=relay.answer,
                model_name=answered_by,
                project_id=resolved.project_id,
            )
        except Exception:  # the client has its answer; the log keeps why it was not kept
            db.session.rollback()
            log.exception("could not record a /v1 answer")

    if call.stream:

        def frames():
            try:
                yield from writer.frames(_arrived(relay.events()))
            finally:
                relay.close()
                record()

        headers.update({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return Response(
            stream_with_context(frames()), mimetype="text/event-stream", headers=headers
        )
    try:
        for _event in relay.events():
            pass
    finally:
        relay.close()
    record()
    error = relay.answer.error
    if error is not None:
        raise GatewayError(error.code, error.message, provider_status(error.code))
    response = jsonify(writer.body(relay.answer))
    response.headers.update(headers)
    return response


def _arrived(events: Iterator[StreamEvent], most: int = 256) -> Iterator[StreamEvent]:
    """The relay's events as fast as the client takes them. A greenlet reads the relay
    while the last frame goes out; text (or reasoning) that arrived meanwhile is joined
    into one event, so a fast stream costs a few frames, not one per token, while a slow
    one is sent token by token, never held back. At most `most` events wait: then the
    reader waits for the client."""
    waiting: Queue = Queue(maxsize=most)

    def read() -> None:
        try:
            for event in events:
                waiting.put(event)
        finally:
            waiting.put(_END)

    reader = gevent.spawn(read)
    held: Any = None
    try:
        while True:
            event = waiting.get() if held is None else held
            held = None
            if event is _END:
                return
            if _joinable(event):
                texts = [event.text]
                while not waiting.empty():
                    following = waiting.get_nowait()
                    if type(following) is type(event) and _joinable(following):
                        texts.append(following.text)
                    else:
                        held = following
                        break
                if len(texts) > 1:
                    event = type(event)("".join(texts))
            yield event
    finally:
        reader.kill()  # the client left: the relay's own cleanup runs in the reader


def _joinable(event: Any) -> bool:
    return isinstance(event, TextDelta) or (
        isinstance(event, ReasoningDelta) and event.signature is None
    )


_END = object()


@bp.route("/<path:rest>", methods=["GET", "POST"])
def unknown_route(rest: str):
    raise GatewayError(
        "unknown_route",
        f"Numi serves no /v1/{rest}: it serves /v1/models, /v1/chat/completions, /v1/responses and /v1/messages.",
        404,
    )
