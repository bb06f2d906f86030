"""/mcp: Numi's own MCP server, for desktop agents and editors holding a Numi API key.

The Streamable HTTP transport of the Model Context Protocol: each JSON-RPC 2.0 message is
one `POST /mcp`, answered with one JSON body (`application/json`; the server sends no
requests of its own, so it opens no event stream: `GET /mcp` is 405, as the transport
allows, and so is `DELETE`: a session holds nothing to end). Methods: `initialize` (the
version is negotiated among HANDSHAKE_VERSIONS: the client's when Numi speaks it, else
Numi's newest), `ping`, `tools/list` and `tools/call` (numi/gateway/mcp_tools.py); a
notification or a response is taken with 202.

A JSON-RPC batch (an array of messages) is taken in a session negotiated at 2025-03-26,
the one version whose transport allowed batches (2025-06-18 removed them): its requests
are answered in one array, in order (notifications and responses get no element; a batch
of only those, 202), each counted against the key's rate, and `initialize` may not be in
one. A batch in a session of another version, or an empty one, is refused as a whole with
one JSON-RPC error; an element that is not a message gets its own error in the array, as
JSON-RPC 2.0 answers an invalid batch.

`initialize` answers with an `Mcp-Session-Id`: the key's id and the negotiated version,
signed with the app's secret, so any process of a scale-out reads it and nothing is
stored. Every later request must carry it (400 without, 404 for one that is not this
key's), and an `MCP-Protocol-Version` header, when sent, must be a version Numi speaks.

Authentication is a Numi API key (`Authorization: Bearer` or `x-api-key`) with the use
`mcp`, checked and rate-limited as on /v1; each tool needs its own use as well, and a key
lists only the tools it may call. No session cookie or token opens /mcp. A browser's
Origin other than Numi's own (or one of NUMI_API_CORS_ORIGINS) is refused (the
transport's guard against DNS rebinding). A refusal is a JSON-RPC error whose `data.code`
is the stable code (docs/errors.md); a tool's own failure is its result with `isError`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, current_app, jsonify, request
from itsdangerous import BadSignature, URLSafeSerializer
from werkzeug.exceptions import HTTPException

from .. import __version__
from ..errors import NumiError, is_storage_failure
from ..extensions import db
from ..gateway.errors import GatewayError
from ..gateway.keys import KEY_PREFIX, Grant, allows_use, authenticate, require_use
from ..identity import bearer_token
from ..lazy_modules import lazy_module
from ..services import services
from .inputs import decode_json
from .security import same_origin

# The tools' code (and the chat search, retrieval and asking behind them) is loaded by the
# first /mcp call, not at start-up.
if TYPE_CHECKING:
    from ..gateway import mcp_tools
else:
    mcp_tools = lazy_module("numi.gateway.mcp_tools")

log = logging.getLogger(__name__)

bp = Blueprint("mcp_server", __name__)

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# The versions whose Streamable HTTP transport takes a JSON-RPC batch in one POST.
BATCH_VERSIONS = ("2025-03-26",)
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"

# JSON-RPC 2.0's error codes, and the server's own range for a refused key or session.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, REFUSED = -32603, -32001

INSTRUCTIONS = (
    "Numi holds this user's chats, documents and models. search_chats and read_chat find "
    "what was said before; search_documents finds passages of the user's files; web_search "
    "searches the web; ask puts a "
    "question to one of the user's models and keeps it as a Numi chat."
)


class McpRefusal(Exception):
    """A refusal drawn as a JSON-RPC error: its code, the stable code, the HTTP status."""

    def __init__(self, rpc_code: int, code: str, message: str, status: int = 200, retry_after=None):
        super().__init__(message)
        self.rpc_code, self.code, self.message, self.status = rpc_code, code, message, status
        self.retry_after = retry_after


def _error_body(exc: McpRefusal, message_id: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": message_id,
        "error": {"code": exc.rpc_code, "message": exc.message, "data": {"code": exc.code}},
    }


def _error(exc: McpRefusal, message_id: Any = None) -> Response:
    response = jsonify(_error_body(exc, message_id))
    response.status_code = exc.status
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="numi"'
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _serializer() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.secret_key, salt="numi.mcp-session")


def _session_id(key: Grant, version: str) -> str:
    return _serializer().dumps({"k": key.id, "v": version})


def _check_session(key: Grant) -> str:
    """The version the request's session negotiated; refuses a missing or foreign one."""
    given = request.headers.get(SESSION_HEADER)
    if not given:
        raise McpRefusal(
            INVALID_REQUEST,
            "mcp_session_missing",
            f"Send the {SESSION_HEADER} header that initialize answered with.",
            400,
        )
    try:
        session = _serializer().loads(given)
    except BadSignature:
        session = None
    if not isinstance(session, dict) or session.get("k") != key.id:
        raise McpRefusal(
            INVALID_REQUEST,
            "mcp_session_unknown",
            "No such MCP session for this key: initialize a new one.",
            404,
        )
    version = request.headers.get(VERSION_HEADER)
    if version is not None and version not in HANDSHAKE_VERSIONS:
        raise McpRefusal(
            INVALID_REQUEST,
            "mcp_version_unsupported",
            f"Numi speaks MCP {', '.join(HANDSHAKE_VERSIONS)}, not {version!r}.",
            400,
        )
    negotiated = session.get("v")
    return negotiated if isinstance(negotiated, str) else HANDSHAKE_VERSIONS[-1]


def _authorize() -> Grant:
    """The request's key, checked: an API key with the use `mcp`, within its rate."""
    limit = current_app.config["NUMI_API_MAX_BODY_BYTES"]
    if (request.content_length or 0) > limit:
        raise McpRefusal(
            INVALID_REQUEST, "body_too_large", f"A request may be at most {limit} bytes.", 413
        )
    origin = request.headers.get("Origin")
    if (
        origin
        and not same_origin(origin, request.host, request.scheme)
        and origin.lower() not in current_app.config["NUMI_API_CORS_ORIGINS"]
    ):
        raise McpRefusal(INVALID_REQUEST, "bad_origin", "Cross-site request refused.", 403)
    given = [
        request.headers.get("x-api-key"),
        bearer_token(request.headers.get("Authorization", "")),
    ]
    secret = next((s for s in given if s and s.startswith(KEY_PREFIX)), None) or next(
        (s for s in given if s), None
    )
    try:
        key = authenticate(secret)
        services().api_windows.admit(key.id)
        require_use(key, "mcp", "open the MCP server")
    except GatewayError as exc:
        raise McpRefusal(REFUSED, exc.code, exc.message, exc.status, exc.retry_after) from None
    return key


@bp.route("/mcp", methods=["GET", "POST", "DELETE"])
def endpoint():
    try:
        key = _authorize()
        if request.method != "POST":
            response = _error(
                McpRefusal(
                    INVALID_REQUEST,
                    "method_not_allowed",
                    "Numi's MCP server takes POST only: it opens no event stream, and a "
                    "session holds nothing to end.",
                    405,
                )
            )
            response.headers["Allow"] = "POST"
            return response
        body = _body()
        if isinstance(body, list):
            return _batch(key, body)
        message = _checked(body)
    except McpRefusal as exc:
        db.session.rollback()
        return _error(exc)
    if "method" not in message:
        return Response(status=202)  # a response to a request Numi never sends: taken
    if "id" not in message:
        return Response(status=202)  # a notification (initialized, cancelled): nothing to say
    message_id = message["id"]
    try:
        if isinstance(message_id, bool) or not isinstance(message_id, str | int):
            message_id = None
            raise McpRefusal(INVALID_REQUEST, "invalid_body", "A request's id is text or a number.")
        if message["method"] == "initialize":
            result, version = _initialize(message.get("params"))
            response = jsonify(jsonrpc="2.0", id=message_id, result=result)
            response.headers[SESSION_HEADER] = _session_id(key, version)
            return response
        _check_session(key)
        result = _dispatch(key, message["method"], message.get("params"))
    except McpRefusal as exc:
        db.session.rollback()
        return _error(exc, message_id)
    return jsonify(jsonrpc="2.0", id=message_id, result=result)


def _body() -> Any:
    """The body's JSON: one message, or a batch of them (not checked yet)."""
    if request.mimetype != "application/json":
        raise McpRefusal(
            INVALID_REQUEST, "invalid_body", "Send the message as application/json.", 415
        )
    try:
        return decode_json(
            request.get_data(cache=False),
            max_depth=current_app.config["NUMI_MAX_JSON_DEPTH"],
            subject="The message",
            code="invalid_body",
        )
    except NumiError as exc:
        raise McpRefusal(PARSE_ERROR, exc.code, exc.message, 400) from None


def _checked(message: Any) -> dict[str, Any]:
    """One JSON-RPC message, checked."""
    if (
        not isinstance(message, dict)
        or message.get("jsonrpc") != "2.0"
        or ("method" in message and not isinstance(message["method"], str))
    ):
        raise McpRefusal(
            INVALID_REQUEST,
            "invalid_body",
            'Send one JSON-RPC 2.0 message: an object with jsonrpc "2.0" and a method.',
            400,
        )
    return message


def _batch(key: Grant, batch: list[Any]) -> Response:
    """A JSON-RPC batch, in a session whose version allows one: its answers, in order."""
    if not batch:
        raise McpRefusal(
            INVALID_REQUEST, "invalid_batch", "A batch holds at least one message.", 400
        )
    version = _check_session(key)
    if version not in BATCH_VERSIONS:
        raise McpRefusal(
            INVALID_REQUEST,
            "mcp_batch_unsupported",
            f"MCP {version} takes one message a POST: batches were part of "
            f"{', '.join(BATCH_VERSIONS)} only. Send the messages one by one.",
            400,
        )
    # Each request of a batch counts against the key's rate, as if sent alone (the POST
    # itself was counted once).
    requests = sum(1 for m in batch if isinstance(m, dict) and "method" in m and "id" in m)
    try:
        for _ in range(requests - 1):
            services().api_windows.admit(key.id)
    except GatewayError as exc:
        raise McpRefusal(REFUSED, exc.code, exc.message, exc.status, exc.retry_after) from None
    answers = [answer for answer in (_in_batch(key, m) for m in batch) if answer is not None]
    if not answers:
        return Response(status=202)  # only notifications and responses: nothing to say
    return jsonify(answers)


def _in_batch(key: Grant, raw: Any) -> dict[str, Any] | None:
    """The answer to one message of a batch: a result or an error, or None (for a
    notification or a response)."""
    message_id = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(message_id, bool) or not isinstance(message_id, str | int):
        message_id = None
    try:
        message = _checked(raw)
        if "method" not in message or "id" not in message:
            return None
        if message_id is None:
            raise McpRefusal(INVALID_REQUEST, "invalid_body", "A request's id is text or a number.")
        if message["method"] == "initialize":
            raise McpRefusal(
                INVALID_REQUEST,
                "mcp_initialize_in_batch",
                "initialize may not be part of a batch: send it alone, first.",
            )
        result = _dispatch(key, message["method"], message.get("params"))
    except McpRefusal as exc:
        db.session.rollback()
        return _error_body(exc, message_id)
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


def _params(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise McpRefusal(INVALID_PARAMS, "invalid_params", "params must be an object.")
    return params


def _initialize(params: Any) -> tuple[dict[str, Any], str]:
    asked = _params(params).get("protocolVersion")
    if not isinstance(asked, str):
        raise McpRefusal(INVALID_PARAMS, "invalid_params", "initialize needs protocolVersion.")
    # The client's version when Numi speaks it; else Numi's newest, for the client to judge.
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "numi", "title": "Numi", "version": __version__},
        "instructions": INSTRUCTIONS,
    }
    return result, version


def _dispatch(key: Grant, method: str, params: Any) -> dict[str, Any]:
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [tool.listed() for tool in mcp_tools.tools_for(key)]}
    if method == "tools/call":
        return _call_tool(key, _params(params))
    raise McpRefusal(METHOD_NOT_FOUND, "unknown_method", f"Numi's MCP server has no {method!r}.")


def _call_tool(key: Grant, params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments")
    tool = mcp_tools.BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        raise McpRefusal(
            INVALID_PARAMS, "unknown_tool", f"No tool {name!r}: tools/list names this key's tools."
        )
    if not allows_use(key, tool.use):
        raise McpRefusal(
            REFUSED,
            "api_key_scope",
            f"This key may not call {tool.name}: give it the scope {tool.use!r} "
            "(Settings → API keys).",
            403,
        )
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise McpRefusal(INVALID_PARAMS, "invalid_params", "arguments must be an object.")
    try:
        text, structured = tool.run(
            mcp_tools.ToolCall(current_app._get_current_object(), key, arguments)
        )
    except NumiError as exc:
        db.session.rollback()
        return {
            "content": [{"type": "text", "text": f"{exc.message} ({exc.code})"}],
            "structuredContent": {"error": {"code": exc.code, "message": exc.message}},
            "isError": True,
        }
    except Exception as exc:
        db.session.rollback()
        if is_storage_failure(exc):
            raise McpRefusal(
                INTERNAL_ERROR, "storage_unavailable", "The database is unavailable; try again."
            ) from None
        log.exception("MCP tool %s failed", tool.name)
        raise McpRefusal(INTERNAL_ERROR, "internal_error", "Something went wrong on the server.")
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    if exc.code == 413:
        return _error(McpRefusal(INVALID_REQUEST, "body_too_large", "The body is too large.", 413))
    return _error(McpRefusal(INVALID_REQUEST, "unknown_route", str(exc), exc.code or 400))
