"""One gateway call relayed over its routes, with the page's fallback rule.

`Relay.open()` tries the routes in order: a route that fails before any output (an
error, a refusal, a deadline) hands the call to the next one, as a chat's turn does; the
first route that answers is the one the client hears from, and `fallback` says which
ones failed first (the web layer names it in a header). After output has begun, a
failure ends the answer: it is the client's to retry.

The database is not touched here: the routes are plain values read before, and the
caller has ended its transaction, so none is held while a provider streams. Reading the
stream yields to the hub every few events, as the turn loop does, so a fast provider
cannot keep other requests waiting.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent

from ..agent.prepare import prepare_messages
from ..agent.routes import FallbackNotice, Route, adapter_for_route
from ..providers.events import (
    OUTPUT_EVENTS,
    ChatRequest,
    Finish,
    ReasoningDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    Usage,
)
from .errors import GatewayError, provider_status
from .inbound import GatewayCall
from .models import Resolved


@dataclass
class Answer:
    """What the answering route sent, gathered as it streams (for the non-streaming
    body, the kept chat and the usage)."""

    route: Route | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallComplete] = field(default_factory=list)
    usage: Usage | None = None
    finish: Finish | None = None
    error: StreamError | None = None
    started: float = field(default_factory=time.monotonic)

    def take(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallComplete):
            self.tool_calls.append(event)
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish = event
        elif isinstance(event, StreamError):
            self.error = event

    @property
    def content(self) -> str:
        return "".join(self.text)

    @property
    def finish_reason(self) -> str:
        if self.finish is not None:
            return self.finish.reason
        return "tool_calls" if self.tool_calls else "stop"


def _for_route(messages: list[dict[str, Any]], route: Route) -> list[dict[str, Any]]:
    """The client's messages for one route: signed thinking names the Anthropic model it
    goes to (prepare_messages drops what another model signed) or is left out."""
    out = []
    for message in messages:
        envelope = message.get("reasoning_details")
        if envelope is not None:
            message = dict(message)
            if route.kind == "anthropic":
                envelope = copy.copy(envelope)
                envelope["model"] = route.model
                message["reasoning_details"] = envelope
            else:
                del message["reasoning_details"]
        out.append(message)
    return out


def estimate_tokens(call: GatewayCall) -> int:
    """A rough count of the call's prompt (text only), to refuse one no route can hold."""
    texts = [call.system or ""]
    for message in call.messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p.get("text", "") for p in content if p.get("type") == "text")
        for tool_call in message.get("tool_calls") or ():
            texts.append(tool_call["function"]["arguments"])
    # Four characters a token: cheap on the hub, and only a guard against the hopeless.
    return sum(len(t) for t in texts) // 4


class Relay:
    """A call's routes, tried in order until one answers; then that route's events."""

    def __init__(self, app, call: GatewayCall, resolved: Resolved):
        self.app = app
        self.call = call
        self.resolved = resolved
        self.answer = Answer()
        self.fallback: FallbackNotice | None = None
        self._stream: Any = None
        self._leading: list[StreamEvent] = []

    def _request(self, route: Route) -> ChatRequest:
        call = self.call
        system = "\n\n".join(s for s in (self.resolved.project_system, call.system) if s)
        return ChatRequest(
            model=route.model,
            messages=prepare_messages(
                _for_route(call.messages, route),
                kind=route.kind,
                reasoning_policy=route.reasoning_policy,
                model=route.model,
            ),
            tools=list(call.tools),
            system=system or None,
            temperature=call.temperature,
            max_tokens=call.max_tokens,
            reasoning_effort=call.reasoning_effort,
            reasoning_budget=call.reasoning_budget if route.kind == "anthropic" else None,
            reasoning=route.capabilities().reasoning,
            tool_choice=call.tool_choice if call.tools else None,
        )

    def check_size(self) -> None:
        """Refuse a prompt larger than the first route's known context window."""
        window = self.resolved.routes[0].capabilities().context_window
        if window:
            estimate = estimate_tokens(self.call)
            if estimate > window:
                raise GatewayError(
                    "too_many_tokens",
                    f"The messages come to about {estimate} tokens; "
                    f"{self.resolved.routes[0].model} holds {window}.",
                    400,
                    param="messages",
                )

    def open(self) -> Route:
        """Start the call on the first route that answers (its first output or its
        finish has arrived). Raises GatewayError when every route failed before output."""
        last: StreamError | None = None
        routes = self.resolved.routes
        for position, route in enumerate(routes):
            stream = adapter_for_route(self.app, route).stream(self._request(route))
            leading: list[StreamEvent] = []
            failed: StreamError | None = None
            for event in stream:
                if isinstance(event, StreamError):
                    failed = event
                    break
                leading.append(event)
                if isinstance(event, (*OUTPUT_EVENTS, Finish)):
                    break
            if failed is None and not leading:
                failed = StreamError("stream_interrupted", "The provider sent nothing.")
            if failed is not None and not failed.after_output:
                stream.close()
                last = failed
                if position + 1 < len(routes):
                    self.fallback = FallbackNotice.after(
                        self.fallback, route, failed, routes[position + 1]
                    )
                continue
            self._stream, self._leading = stream, leading
            self.answer.route = route
            if failed is not None:
                self._leading.append(failed)
            return route
        assert last is not None
        raise GatewayError(
            last.code,
            f"No route could answer: {last.message}",
            provider_status(last.code),
            retry_after=int(last.retry_after) if last.retry_after else None,
        )

    def events(self) -> Iterator[StreamEvent]:
        """The answering route's events, from the first; each is also gathered into
        `answer`. Ends after the terminal event (Finish or StreamError)."""
        stream = self._stream
        try:
            for count, event in enumerate(self._chained(), 1):
                if count % 16 == 0:
                    gevent.sleep(0)  # a fast stream must not keep the hub
                self.answer.take(event)
                yield event
                if isinstance(event, (Finish, StreamError)):
                    return
        finally:
            if stream is not None:
                stream.close()

    def _chained(self) -> Iterator[StreamEvent]:
        yield from self._leading
        if self._leading and isinstance(self._leading[-1], StreamError):
            return
        yield from self._stream

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
