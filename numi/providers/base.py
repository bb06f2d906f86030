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

Idle deadline. A server that sends only keep-alive comments keeps the socket's read
timeout from ever firing. With ``idle_timeout`` set, a watchdog ends the stream when no
event (text, reasoning, tool call, usage, finish) arrived for that long: the failure is
``provider_timeout``, retried like the others only before any output.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import ProviderError, from_sdk_exception
from .events import OUTPUT_EVENTS, ChatRequest, ModelInfo, StreamError, StreamEvent

DEFAULT_TIMEOUT = 600.0  # seconds without data before a stream is given up
DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff before output: base_delay * 2**attempt with jitter, capped at max_delay.
    A server's Retry-After is waited for as it says (a gateway such as LiteLLM has
    retried already and knows when to come back), unless it is above max_retry_after.
    All waits of one call together stay within max_total (seconds; None: no cap): a wait
    that would pass it is not made, the error is reported instead."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    max_total: float | None = None

    def delay(self, error: ProviderError, attempt: int, waited: float = 0.0) -> float | None:
        """Seconds to wait before retry number `attempt` (0-based), after `waited`
        seconds of earlier waits, or None to give up."""
        if not error.retryable or attempt >= self.max_retries:
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
        transport: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.idle_timeout = idle_timeout if idle_timeout and idle_timeout > 0 else None
        # An httpx2 transport for the SDK client (the caller's address guard), or None.
        self.transport = transport
        self.api_key = api_key
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry or RetryPolicy(max_retries=max_retries, max_total=max_retry_seconds)
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
        from .transport import sdk_http_client

        return sdk_http_client(sdk, self.transport, self.sdk_timeout())

    def sdk_timeout(self) -> Any:
        import httpx2  # loaded already by either SDK

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
        self._idle_expired = False
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
        self._abort_http()
        try:
            self._generator.close()
        except ValueError:
            # The generator is running in another greenlet/thread, blocked on the socket;
            # the shutdown above wakes it and it ends on its own.
            pass

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

    def _watch_idle(self, done: threading.Event, idle: float) -> None:
        """End the attempt's HTTP stream once no event arrived for `idle` seconds."""
        while not done.is_set():
            left = self._last_event_at + idle - time.monotonic()
            if left <= 0:
                self._idle_expired = True
                self._abort_http()
                return
            done.wait(left)

    def _run(self) -> Iterator[StreamEvent]:
        adapter, request = self.adapter, self.request
        idle = adapter.idle_timeout
        while True:
            output_seen = False
            opened = False
            sdk_stream = None
            events: Iterator[StreamEvent] | None = None
            watch_done = threading.Event()
            self._idle_expired = False
            try:
                self.attempts += 1
                sdk_stream = adapter._open(adapter.client, request)
                self._http_response = getattr(sdk_stream, "response", None)
                opened = True
                if self.cancelled:
                    return
                if idle is not None and self._http_response is not None:
                    self._last_event_at = time.monotonic()
                    threading.Thread(
                        target=self._watch_idle, args=(watch_done, idle), daemon=True
                    ).start()
                events = adapter._events(sdk_stream, request)
                for event in events:
                    self._last_event_at = time.monotonic()
                    if isinstance(event, OUTPUT_EVENTS):
                        output_seen = True
                    yield event
                    self._last_event_at = (
                        time.monotonic()
                    )  # the consumer's time is not the provider's
                if self._idle_expired:
                    raise ProviderError(
                        "provider_timeout", "idle"
                    )  # the abort ended the stream quietly
                return
            except Exception as exc:  # GeneratorExit (a close) is not an Exception
                if self.cancelled:
                    return
                if self._idle_expired:
                    error = ProviderError(
                        "provider_timeout", f"The provider sent no data for {idle:g} seconds."
                    )
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


def _close_quietly(sdk_stream: Any) -> None:
    try:
        sdk_stream.close()
    except Exception:  # closing a broken stream may raise; nothing to recover
        pass
