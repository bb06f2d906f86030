"""ScriptedProvider: a real HTTP server on loopback speaking all three wire protocols.

    with ScriptedProvider() as provider:
        provider.enqueue(Scenario().text("Hello", chunks=3))
        client = OpenAI(base_url=provider.openai_base_url, api_key="test")
        ...
        provider.requests[-1].body["messages"]        # what was sent
        provider.listings[-1].path                    # a GET: /v1/models, /props

Routes: POST /v1/chat/completions, /v1/responses, /v1/messages (also without /v1);
GET /v1/models (Anthropic's shape when the request has an `anthropic-version` header, or
a recorded body: `models_body`); GET /props when a recorded llama-server `props` is set.
`Scenario.replay(frames)` answers with a recorded stream byte for byte.
POST /v1/audio/transcriptions and /v1/audio/speech (numi/testing/audio.py); POST
/v1/embeddings and /v1/rerank with deterministic vectors (numi/testing/embeddings.py).

Which scenario answers a request: the next one enqueued for its model
(`enqueue(s, model="m")`), else the next one enqueued for any model, else
`default_scenario(request)`. The built-in default, used when the queue is empty, is a
short text answer that quotes the last user message ("Scripted reply: …"), so demos and
smoke tests work without scripting anything.

The server is stdlib `ThreadingHTTPServer`, one thread per connection, so it runs alike
in a plain process and under gevent's monkey patching (where threads are greenlets).
Frames are pre-encoded before the response starts and each one is written straight to
the socket as one HTTP chunk, so pacing (`Scenario.delay`) is what the client sees.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import audio, embeddings
from .conversation import last_user_text
from .scenario import Drop, Pause, Scenario, Stall
from .prompt_cache import PromptCache
from .tokens import count_prompt_tokens
from .wire import error_body, model_list, render

DEFAULT_MODELS = [
    {"id": "scripted-model", "context_length": 32768},
    {"id": "scripted-reasoning", "context_length": 131072},
]


@dataclass
class RecordedRequest:
    """A request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or None
    protocol: str | None  # openai_chat | openai_responses | anthropic | None (GET)
    finished: threading.Event = field(default_factory=threading.Event, repr=False)
    disconnected: threading.Event = field(default_factory=threading.Event, repr=False)
    # time.perf_counter() when the request arrived, and after each paced delta (a frame
    # that follows a per-chunk delay) was written: benchmarks in the same process measure
    # turn overhead and added latency with them.
    received_at: float = field(default_factory=time.perf_counter, repr=False)
    delta_times: list[float] = field(default_factory=list, repr=False)

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def api_key(self) -> str | None:
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None


def echo_scenario(request: RecordedRequest) -> Scenario:
    """The answer when nothing is enqueued: quotes the last user message."""
    said = last_user_text(request.protocol, request.body)[:200]
    return (
        Scenario()
        .text(f"Scripted reply: {said}" if said else "Scripted reply.", chunks=3)
        .usage(None, 5)
    )


class ScriptedProvider:
    """The scripted provider server. Start it (or use it as a context manager), point an
    SDK at `openai_base_url` / `anthropic_base_url`, enqueue scenarios, read `requests`
    (the model calls, POSTs) and `listings` (the GETs: model lists, /props, kept apart so
    that a model list fetched in the background never counts as a model call)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        models: list[dict[str, Any]] | None = None,
        api_key: str | None = None,
        default_scenario: Callable[[RecordedRequest], Scenario] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._initial_models = models if models is not None else DEFAULT_MODELS
        self.models = list(self._initial_models)
        # A recorded GET /v1/models body (JSON bytes), sent instead of rendering `models`.
        self.models_body: bytes | None = None
        # A recorded llama-server GET /props body (JSON bytes); None: /props is a 404.
        self.props: bytes | None = None
        self.api_key = api_key  # when set, other keys get a 401 in the protocol's shape
        self.default_scenario = default_scenario or echo_scenario
        self.requests: list[RecordedRequest] = []
        # Anthropic's prompt cache, played for requests with cache_control breakpoints.
        self.prompt_cache = PromptCache()
        self.listings: list[RecordedRequest] = []
        # POST /embeddings and /rerank (numi/testing/embeddings.py), kept apart from the model
        # calls; the vectors' length, and errors to answer first (`http_error` scenarios).
        self.embedding_requests: list[RecordedRequest] = []
        self.embedding_dim = embeddings.DEFAULT_DIM
        self.embedding_failures: deque[Scenario] = deque()
        self._queue: deque[Scenario] = deque()
        self._model_queues: dict[str, deque[Scenario]] = {}
        self._changed = threading.Condition()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> ScriptedProvider:
        """Bind (port 0 = a free port) and serve in a background thread."""
        self._server = _Server((self.host, self.port), _Handler)
        self._server.provider = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def wait(self) -> None:
        """Block until the server stops (Ctrl-C in the calling thread interrupts)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        """Stop serving; stalled and paced streams end at once."""
        self._stopping.set()
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the anthropic SDK adds /v1 itself

    # --- scripting ----------------------------------------------------------------------

    def enqueue(self, *scenarios: Scenario, model: str | None = None) -> None:
        """Queue answers, first in first out; with `model`, only for that model."""
        with self._changed:
            queue = self._model_queues.setdefault(model, deque()) if model else self._queue
            queue.extend(scenarios)

    def release(self) -> None:
        """Let every stalled stream (now and later, until reset) continue."""
        self._released.set()

    def reset(self) -> None:
        """Forget queued scenarios, recorded requests and a test's model list; re-arm stalls."""
        with self._changed:
            self._queue.clear()
            self._model_queues.clear()
            self.requests.clear()
            self.listings.clear()
            self.embedding_requests.clear()
            self.embedding_failures.clear()
            self.embedding_dim = embeddings.DEFAULT_DIM
            self._released.clear()
            self.models = list(self._initial_models)  # a test's own list ends with it
            self.models_body = self.props = None
            self.prompt_cache.reset()

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> RecordedRequest:
        """Block until `count` requests have arrived; return the count-th (1-based)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"expected {count} requests, got {len(self.requests)}")
            return self.requests[count - 1]

    @property
    def last_request(self) -> RecordedRequest:
        return self.requests[-1]

    def _record(self, request: RecordedRequest) -> None:
        with self._changed:
            if request.method == "GET":
                self.listings.append(request)
            elif _route(request.path) in embeddings.ROUTES:
                self.embedding_requests.append(request)
            else:
                self.requests.append(request)
            self._changed.notify_all()

    def _next_scenario(self, request: RecordedRequest) -> Scenario:
        with self._changed:
            queue = self._model_queues.get(request.model or "")
            if queue:
                return queue.popleft()
            if self._queue:
                return self._queue.popleft()
        return self.default_scenario(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # benchmarks open 100+ streams at once
    provider: ScriptedProvider

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up (a cancelled stream) is expected, not worth a traceback


_ROUTES = {
    "/chat/completions": "openai_chat",
    "/responses": "openai_responses",
    "/messages": "anthropic",
}


def _route(path: str) -> str:
    """The path without query and without the optional /v1 prefix."""
    path = path.split("?", 1)[0].rstrip("/")
    return path[3:] if path.startswith("/v1/") else path


def _protocol_for(path: str) -> str | None:
    return _ROUTES.get(_route(path))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # As model servers do (Go's net/http, uvicorn): a small write goes out at once, not
    # after the client's delayed ACK of the last one (up to 40 ms on a kept-alive
    # connection, which has left TCP's quick-ACK start).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests and benchmarks read the recorded requests instead

    @property
    def provider(self) -> ScriptedProvider:
        return self.server.provider

    def _new_record(self, body: Any, protocol: str | None) -> RecordedRequest:
        headers = {name.lower(): value for name, value in self.headers.items()}
        record = RecordedRequest(self.command, self.path, headers, body, protocol)
        self.provider._record(record)
        return record

    def _authorised(self, record: RecordedRequest) -> bool:
        return self.provider.api_key is None or record.api_key == self.provider.api_key

    def do_GET(self) -> None:
        record = self._new_record(None, None)
        try:
            anthropic = "anthropic-version" in record.headers
            protocol = "anthropic" if anthropic else "openai_chat"
            route = _route(self.path)
            if route == "/props" and self.provider.props is not None:
                self._send_json(200, self.provider.props)
            elif route != "/models":
                self._send_json(404, error_body(protocol, "bad_request", "Not found"))
            elif not self._authorised(record):
                self._send_json(401, error_body(protocol, "auth"))
            elif self.provider.models_body is not None:
                self._send_json(200, self.provider.models_body)
            else:
                self._send_json(200, model_list(protocol, self.provider.models))
        finally:
            record.finished.set()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if _route(self.path) in audio.ROUTES:
            self._audio(raw)
            return
        if _route(self.path) in embeddings.ROUTES:
            self._embeddings(raw)
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        protocol = _protocol_for(self.path)
        record = self._new_record(body, protocol)
        try:
            if protocol is None:
                self._send_json(
                    404, error_body("openai_chat", "bad_request", f"No route {self.path}")
                )
                return
            if not self._authorised(record):
                self._send_json(401, error_body(protocol, "auth"))
                return
            scenario = self.provider._next_scenario(record)
            if scenario.usage_tokens and scenario.usage_tokens[0] is None:
                # usage(None, n): report the tokenizer's count of what was received.
                counted = count_prompt_tokens(protocol, body)
                scenario = replace(scenario, usage_tokens=(counted, *scenario.usage_tokens[1:]))
                cached = (
                    self.provider.prompt_cache.account(body) if protocol == "anthropic" else None
                )
                if cached is not None:  # cache_control breakpoints: Anthropic's accounting
                    scenario = replace(scenario, cache_usage=cached)
            if scenario.headers_held and not self._wait_while_stalled(record):
                return
            if scenario.error is not None:
                self._send_error(protocol, scenario)
            else:
                self._stream(render(scenario, protocol, record.model or "scripted-model"), record)
        finally:
            record.finished.set()

    def _audio(self, raw: bytes) -> None:
        """The audio routes (numi/testing/audio.py)."""
        route = _route(self.path)
        content_type = self.headers.get("Content-Type", "")
        if route == "/audio/transcriptions":
            body, data = audio.parse_multipart(content_type, raw)
        else:
            try:
                body, data = json.loads(raw or b"null"), None
            except ValueError:
                body, data = None, None
        record = self._new_record(body, None)
        try:
            if not self._authorised(record):
                self._send_json(401, error_body("openai_chat", "auth"))
                return
            with self.provider._changed:
                queue = self.provider._model_queues.get(record.model or "")
                scenario = (queue or self.provider._queue or deque([None])).popleft()
            if scenario is not None and scenario.error is not None:
                self._send_error("openai_chat", scenario)
            elif route == "/audio/transcriptions":
                if data is None:
                    self._send_json(400, error_body("openai_chat", "bad_request", "No file."))
                else:
                    self._send_json(200, {"text": audio.transcript_text(scenario, data)})
            else:
                text = body.get("input", "") if isinstance(body, dict) else ""
                wav = audio.speech_wav(str(text))
                self.send_response(200)
                self.send_header("Content-Type", "audio/wav")
                self.send_header("Content-Length", str(len(wav)))
                self.end_headers()
                self.wfile.write(wav)
        finally:
            record.finished.set()

    def _embeddings(self, raw: bytes) -> None:
        """The embedding and rerank routes (numi/testing/embeddings.py)."""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        record = self._new_record(body, None)
        try:
            if not self._authorised(record):
                self._send_json(401, error_body("openai_chat", "auth"))
                return
            with self.provider._changed:
                failures = self.provider.embedding_failures
                failure = failures.popleft() if failures else None
            if failure is not None:
                self._send_error("openai_chat", failure)
            elif _route(self.path) == "/embeddings":
                self._send_json(*embeddings.embeddings_body(body, self.provider.embedding_dim))
            else:
                self._send_json(*embeddings.rerank_body(body))
        finally:
            record.finished.set()

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, bytes):  # a recorded JSON body, byte for byte
            data, content_type = body, "application/json"
        elif isinstance(body, str):  # e.g. a proxy's HTML error page
            data, content_type = body.encode(), "text/html"
        else:
            data, content_type = json.dumps(body).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, protocol: str, scenario: Scenario) -> None:
        error = scenario.error
        assert error is not None
        headers = {}
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
            headers["retry-after-ms"] = str(int(error.retry_after * 1000))
        headers.update(error.headers or {})
        body = (
            error.body
            if error.body is not None
            else error_body(protocol, error.kind, error.message)
        )
        self._send_json(error.status, body, headers)

    def _stream(self, frames: list[Any], record: RecordedRequest) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stopping = self.provider._stopping
        write = self.wfile.write
        stamp = record.delta_times.append
        clock = time.perf_counter
        paced = False
        try:
            for frame in frames:
                if isinstance(frame, bytes):
                    write(b"%x\r\n%b\r\n" % (len(frame), frame))
                    if paced:
                        stamp(clock())
                        paced = False
                elif isinstance(frame, Pause):
                    paced = True
                    if stopping.wait(frame.seconds):
                        break
                elif isinstance(frame, Stall):
                    if not self._wait_while_stalled(record, frame.keepalive):
                        return
                elif isinstance(frame, Drop):
                    self._drop()
                    return
            write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            record.disconnected.set()
            self.close_connection = True

    def _wait_while_stalled(self, record: RecordedRequest, keepalive: float | None = None) -> bool:
        """Hold the stream until released; False when the client went away meanwhile."""
        next_comment = time.monotonic() + (keepalive or 0)
        while not self.provider._released.wait(0.02):
            if keepalive and time.monotonic() >= next_comment:
                next_comment += keepalive
                comment = b": keep-alive\n\n"
                try:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(comment), comment))
                except (BrokenPipeError, ConnectionResetError):
                    record.disconnected.set()
                    self.close_connection = True
                    return False
            if self._client_gone():
                record.disconnected.set()
                self.close_connection = True
                return False
        return not self.provider._stopping.is_set()

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _drop(self) -> None:
        """End the connection in the middle of the chunked body."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
