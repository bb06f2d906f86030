"""What every adapter shares: the stream lifecycle, retries and cancellation.

An adapter subclass supplies three things:

- ``_make_client()``  build its SDK client (SDKs are imported here, lazily: importing
  openai or anthropic costs most of a second, the web app must start faster);
- ``_open(client, request)``  send the request and return the open stream: an
  ``sse.SSEStream`` (``.response``, the httpx2 response; iteration over
  ``(event name, JSON data)`` pairs as plain dicts; ``close()``);
- ``_events(sdk_stream, request)``  translate that stream into neutral events, raising
  ``ProviderError`` (or letting SDK and httpx2 exceptions through) on failure.

``ProviderStream`` runs that, and owns the rules that must be the same for every
protocol:

Retries. The SDK clients are built with ``max_retries=0``; retries happen here, so they
are the same for every SDK and also cover failures that arrive inside a 200 stream before
any output (Anthropic sends ``overloaded_error`` as an event right after
``message_start``). A retryable failure (rate limit, 5xx/529, unreachable, interrupted) is
retried with exponential backoff, honouring Retry-After, only while nothing has been
yielded that counts as output (text, reasoning, tool call). After output, the stream ends
with ``StreamError(after_output=True)``.

Cancellation. ``ProviderStream.close()`` (alias ``cancel()``) may be called from the
consuming greenlet/thread or from another one while the consumer is blocked reading. It
shuts the socket down, which wakes a blocked read in both plain threads and gevent,
closes the HTTP response, and ends the iteration without a terminal event. A retry
backoff in progress is interrupted too.

Deadlines. A server that sends only keep-alive comments keeps the socket's read timeout
from ever firing. With ``idle_timeout`` set, a watchdog ends the stream when no event
(text, reasoning, tool call, usage, finish) arrived for that long. With
``first_token_timeout`` set, the first output (text, reasoning, tool call) must come that
long after the request was sent, whatever else arrived. ``headers_timeout`` bounds the
wait for the response's status line and headers (the transport's read timeout for the
response head; the body keeps ``timeout``). Each ends the attempt with
``provider_timeout``. The idle deadline is retried like other failures before any
output; the first-token and headers deadlines are not: a model that did not start
answering would most likely stay silent as long again, so the turn moves to its next
route at once.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .errors import ProviderError, from_sdk_exception
from .events import OUTPUT_EVENTS, ChatRequest, ModelInfo, StreamError, StreamEvent

DEFAULT_TIMEOUT = 600.0  # seconds without data before a stream is given up
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_LOADING_WAIT = 300.0  # seconds a loading model is waited for without an idle deadline


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff before output: base_delay * 2**attempt with jitter, capped at max_delay.
    A server's Retry-After is waited for as it says (a gateway such as LiteLLM has
    retried already and knows when to come back), unless it is above max_retry_after.
    A 429 without Retry-After is retried once at most: a gateway (LiteLLM 1.108 sends
    none) has retried already, and more attempts only keep the user waiting (issue 44:
    16-17.5 s before the error with three). All waits of one call together stay within
    max_total (seconds; None: no cap): a wait that would pass it is not made, the error
    is reported instead.

    A server still loading its model (llama-server's "503 Loading model" in the seconds
    after it starts) is not failing: it is asked again every `loading_poll` seconds, whatever
    `max_retries` says, until the waits reach `max_loading_wait` (the idle deadline)."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    max_total: float | None = None
    loading_poll: float = 0.5
    max_loading_wait: float = 300.0

    def delay(self, error: ProviderError, attempt: int, waited: float = 0.0) -> float | None:
        """Seconds to wait before retry number `attempt` (0-based), after `waited`
        seconds of earlier waits, or None to give up."""
        if error.loading:
            return (
                self.loading_poll if waited + self.loading_poll <= self.max_loading_wait else None
            )
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.code == "rate_limited" and error.retry_after is None and attempt >= 1:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            wait = error.retry_after
        else:
            backoff = min(self.max_delay, self.base_delay * 2**attempt)
            wait = backoff * random.uniform(0.8, 1.0)
        if self.max_total is not None and waited + wait > self.max_total:
            return None
        return wait


def split_query(base_url: str) -> tuple[str, dict[str, str]]:
    """An endpoint's base URL without its query (and trailing slash), and that query's
    parameters: `https://h/v1?api-version=2&api-key=K` -> (`https://h/v1`, {...})."""
    parts = urlsplit(base_url)
    path_only = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
    return path_only, dict(parse_qsl(parts.query, keep_blank_values=True))


class ProviderAdapter:
    """Base class of the three protocol adapters. Capabilities are plain attributes:
    what the protocol can carry, not what a given model can do (see capabilities.py)."""

    kind: ClassVar[str] = ""
    supports_tools: ClassVar[bool] = True
    supports_vision: ClassVar[bool] = True
    supports_reasoning: ClassVar[bool] = True
    needs_key: ClassVar[bool] = True

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_retries: int = 2,
        max_retry_seconds: float | None = None,
        retry: RetryPolicy | None = None,
        idle_timeout: float | None = None,
        first_token_timeout: float | None = None,
        headers_timeout: float | None = None,
        transport: Any = None,
    ) -> None:
        """`timeout` is the longest wait for any bytes on a stream; `idle_timeout` the
        longest wait for an event (keep-alive comments do not count), `first_token_timeout`
        for the first output after the request was sent, `headers_timeout` for the
        response's status line and headers; `max_retries` (or a full `retry` policy) bounds
        retries before any output, `max_retry_seconds` the time all their waits may take
        together; `transport` (an httpx2 transport) carries every request, redirects
        included."""
        # The SDKs append their paths to the base URL's raw path, query included, so an
        # endpoint like `…/v1?api-key=K` became `…/v1?api-key=K/chat/completions`: the query
        # is split off here and sent with every request as the SDK's default query.
        self.base_url, self.default_query = split_query(base_url)
        self.idle_timeout = _deadline(idle_timeout)
        self.first_token_timeout = _deadline(first_token_timeout)
        self.headers_timeout = _deadline(headers_timeout)
        # An httpx2 transport for the SDK client (the caller's address guard), or None.
        self.transport = transport
        self.api_key = api_key
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry or RetryPolicy(
            max_retries=max_retries,
            max_total=max_retry_seconds,
            # A model still loading is waited for as long as a silent stream would be.
            max_loading_wait=self.idle_timeout or DEFAULT_LOADING_WAIT,
        )
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    # --- public API ---------------------------------------------------------------------

    def stream(self, request: ChatRequest) -> ProviderStream:
        """Start a model call; iterate the result for neutral events. Nothing is sent
        until the first `next()`."""
        return ProviderStream(self, request)

    def list_models(self) -> list[ModelInfo]:
        """The models the endpoint serves. Raises ProviderError."""
        try:
            return self._list_models(self.client)
        except Exception as exc:
            raise self.map_exception(exc) from exc

    def test_connection(self, model: str | None = None) -> str:
        """Check URL, key and (optionally) model by listing models. Returns a sentence to
        show the user; raises ProviderError (provider_auth, provider_unavailable,
        model_not_found) otherwise."""
        models = self.list_models()
        ids = [info.id for info in models]
        if model and ids and model not in ids:
            shown = ", ".join(ids[:8]) + (", …" if len(ids) > 8 else "")
            raise ProviderError(
                "model_not_found",
                f"{self.base_url} does not offer the model {model!r}. Available: {shown}",
            )
        found = f"{len(ids)} model{'s' if len(ids) != 1 else ''} available"
        chosen = f"; {model} is available" if model and ids else ""
        return f"Connected to {self.base_url}: {found}{chosen}."

    def close(self) -> None:
        """Release the SDK client's connection pool."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    @property
    def client(self) -> Any:
        """The SDK client, built on first use (the SDK import happens here)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._make_client()
        return self._client

    def map_exception(self, exc: BaseException, *, streaming: bool = False) -> ProviderError:
        return from_sdk_exception(
            exc, base_url=self.base_url, api_key=self.api_key, streaming=streaming
        )

    def http_client(self, sdk: Any) -> Any:
        """The SDK's default httpx client on this adapter's transport (or the SDK's own),
        with the fast read path for streamed bodies (numi.providers.transport)."""
        from .transport import sdk_http_client  # lazy: start-up time

        return sdk_http_client(sdk, self.transport, self.sdk_timeout(), self.headers_timeout)

    def sdk_timeout(self) -> Any:
        import httpx2  # lazy: start-up time (either SDK has loaded it by now)

        return httpx2.Timeout(self.timeout, connect=self.connect_timeout)

    # --- subclass hooks ---------------------------------------------------------------

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _open(self, client: Any, request: ChatRequest) -> Any:
        raise NotImplementedError

    def _events(self, sdk_stream: Any, request: ChatRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError

    def _list_models(self, client: Any) -> list[ModelInfo]:
        raise NotImplementedError


class ProviderStream(Iterator[StreamEvent]):
    """An iterator of neutral events for one model call, closeable from anywhere."""

    def __init__(self, adapter: ProviderAdapter, request: ChatRequest) -> None:
        self.adapter = adapter
        self.request = request
        self.attempts = 0
        self.waited = 0.0  # seconds spent in retry backoffs so far
        self._cancelled = threading.Event()
        self._http_response: Any = None
        self._last_event_at = 0.0  # monotonic time of the last event (the idle deadline)
        self._output_seen = False  # the attempt has yielded output (no first-token deadline)
        self._expired: ProviderError | None = None  # the deadline that ended the attempt
        self._generator = self._run()

    def __iter__(self) -> ProviderStream:
        return self

    def __next__(self) -> StreamEvent:
        return next(self._generator)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def close(self) -> None:
        """Stop the call now: close the HTTP stream; iteration ends without a terminal
        event. Safe to call twice, and from another greenlet or thread."""
        self._cancelled.set()
        try:
            # Paused at an event: its own cleanup closes the response (a body read to its
            # end leaves the connection in the pool for the next request).
            self._generator.close()
        except ValueError:
            # The generator is running in another greenlet/thread, blocked on the socket:
            # the shutdown wakes it and it ends on its own.
            self._abort_http()

    cancel = close

    def __enter__(self) -> ProviderStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _abort_http(self) -> None:
        response = self._http_response
        if response is None:
            return
        network_stream = getattr(response, "extensions", {}).get("network_stream")
        sock = network_stream.get_extra_info("socket") if network_stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def _watch(self, done: threading.Event, first_output_by: float | None) -> None:
        """End the attempt's HTTP stream once no event arrived for the idle deadline, or
        no output by `first_output_by` (monotonic time)."""
        idle = self.adapter.idle_timeout
        while not done.is_set():
            now = time.monotonic()
            first_by = None if self._output_seen else first_output_by
            if first_by is not None and now >= first_by:
                self._expired = silent_model(self.adapter.first_token_timeout, "output")
            elif idle is not None and now >= self._last_event_at + idle:
                self._expired = ProviderError(
                    "provider_timeout", f"The provider sent no data for {idle:g} seconds."
                )
            if self._expired is not None:
                self._abort_http()
                return
            ends = [first_by] if first_by is not None else []
            if idle is not None:
                ends.append(self._last_event_at + idle)
            if not ends:
                return
            done.wait(min(ends) - now)

    def _run(self) -> Generator[StreamEvent, None, None]:
        adapter, request = self.adapter, self.request
        watched = adapter.idle_timeout is not None or adapter.first_token_timeout is not None
        while True:
            output_seen = self._output_seen = False
            opened = False
            sdk_stream = None
            events: Iterator[StreamEvent] | None = None
            watch_done = threading.Event()
            self._expired = None
            sent_at = time.monotonic()
            try:
                self.attempts += 1
                sdk_stream = adapter._open(adapter.client, request)
                self._http_response = getattr(sdk_stream, "response", None)
                opened = True
                if self.cancelled:
                    return
                if watched and self._http_response is not None:
                    self._last_event_at = time.monotonic()
                    first = adapter.first_token_timeout
                    threading.Thread(
                        target=self._watch,
                        args=(watch_done, None if first is None else sent_at + first),
                        daemon=True,
                    ).start()
                events = adapter._events(sdk_stream, request)
                for event in events:
                    self._last_event_at = time.monotonic()
                    if isinstance(event, OUTPUT_EVENTS):
                        output_seen = self._output_seen = True
                    yield event
                    self._last_event_at = (
                        time.monotonic()
                    )  # the consumer's time is not the provider's
                if self._expired is not None:
                    raise self._expired  # the abort ended the stream quietly
                return
            except Exception as exc:  # GeneratorExit (a close) is not an Exception
                if self.cancelled:
                    return
                if self._expired is not None:
                    error = self._expired
                elif not opened and adapter.headers_timeout and _read_timed_out(exc):
                    error = silent_model(adapter.headers_timeout, "response headers")
                else:
                    error = adapter.map_exception(exc, streaming=opened)
                delay = (
                    None
                    if output_seen
                    else adapter.retry.delay(error, self.attempts - 1, self.waited)
                )
                if delay is None:
                    yield StreamError(
                        code=error.code,
                        message=error.message,
                        retry_after=error.retry_after,
                        status=error.status,
                        after_output=output_seen,
                        overflow=getattr(error, "overflow", None),
                    )
                    return
            finally:
                watch_done.set()
                self._http_response = None
                if events is not None:
                    events.close()  # type: ignore[attr-defined]
                if sdk_stream is not None:
                    _close_quietly(sdk_stream)
            self.waited += delay or 0.0
            if self._cancelled.wait(delay):
                return


def silent_model(seconds: float | None, what: str) -> ProviderError:
    """The failure of a model that sent no `what` within its deadline: not retried, so
    the turn moves to its next route at once."""
    return ProviderError(
        "provider_timeout",
        f"The provider sent no {what} within {seconds or 0:g} seconds.",
        retryable=False,
    )


def _deadline(seconds: float | None) -> float | None:
    """A deadline in seconds, or None for none (0 or less turns a deadline off)."""
    return seconds if seconds and seconds > 0 else None


def _read_timed_out(exc: BaseException) -> bool:
    """Whether a read timed out (not a connect): the SDK's error wraps the HTTP client's."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__name__ == "ReadTimeout":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _close_quietly(sdk_stream: Any) -> None:
    try:
        sdk_stream.close()
    except Exception:  # closing a broken stream may raise; nothing to recover
        pass
