"""A chat's live event channel: event ids, the running turn's buffer, and subscribers.

One `ChatChannel` per chat with live activity. Events are `{event_id, turn_id, type, data}`
dicts; `event_id` increases by one per chat across turns. The running (or recently
finished) turn keeps its events in a buffer bounded by count and bytes; a subscriber that
reconnects with its last event id gets what it missed from the buffer, or, when that has
been dropped, a `snapshot` of the turn so far.

A slow subscriber never slows the producer: `publish()` never blocks. Each subscriber has a
bounded queue; when it overflows, the queue is cleared and the subscriber is marked to
resync, and its next read yields a snapshot followed by live events.

Everything here runs in greenlets of one process; publish() does no I/O and never yields,
so it needs no locks. This is the in-process backend; numi/turns/redis_channel.py is the Redis one
with the same interface (begin_turn, publish, subscribe, snapshot_event, last_event_id).

Each event is JSON-encoded at most once per process (`Event.encoded`): the JSON views
(WebSocket and SSE) send that text as it is instead of encoding the event per client. A
content or reasoning delta (nearly every event) is encoded on first use, so a chat watched
only through the HTML view never encodes it, and without `json.dumps` of its dict.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent.event
from gevent.queue import Empty, Queue

from .events import check_event_type

TERMINAL = "turn_end"


DELTAS = ("content", "reasoning")

# A string as json.dumps(..., ensure_ascii=False) writes it (the C encoder, no dict walk).
_json_string = json.encoder.encode_basestring


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _data_json(type_: str, data: dict[str, Any]) -> str:
    # A delta's data is {"delta": text, "step": n} (Turn.flush): written directly, the
    # same text _dumps makes, for a fraction of its cost (it is nearly every event).
    if type_ in DELTAS and len(data) == 2:
        delta, step = data.get("delta"), data.get("step")
        if type(delta) is str and type(step) is int and next(iter(data)) == "delta":
            return '{"delta":%s,"step":%d}' % (_json_string(delta), step)
    elif type_ in DELTAS and len(data) == 3:  # a compare lane's delta (Turn.flush)
        delta, step, lane = data.get("delta"), data.get("step"), data.get("lane")
        if type(delta) is str and type(step) is int and type(lane) is int:
            if next(iter(data)) == "delta":
                return '{"delta":%s,"step":%d,"lane":%d}' % (_json_string(delta), step, lane)
    return _dumps(data)


def event_tail(turn_id: str | None, type_: str, data: dict[str, Any]) -> str:
    """The JSON of an event after its id: `{"event_id":` + id + this is the whole event."""
    # turn ids (hex) and event types (names in code) need no escaping.
    turn = f'"{turn_id}"' if turn_id is not None else "null"
    return f',"turn_id":{turn},"type":"{type_}","data":{_data_json(type_, data)}}}'


class Event(dict):
    """An event dict that carries its own JSON text, made at most once per process: given
    (the Redis stream's entry), made when published, or for deltas on first use."""

    __slots__ = ("_text", "_views")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._text: str | None = None
        self._views: dict | None = None

    def views(self) -> dict:
        """What views made of this event, for the other subscribers of this process to
        reuse (the HTML view's rendered saved message); made on first use."""
        views = self._views
        if views is None:
            views = self._views = {}
        return views

    @property
    def encoded(self) -> str:
        text = self._text
        if text is None:
            text = self._text = '{"event_id":%d%s' % (
                self["event_id"],
                event_tail(self["turn_id"], self["type"], self["data"]),
            )
        return text

    @encoded.setter
    def encoded(self, text: str) -> None:
        self._text = text


def make_event(
    event_id: int, turn_id: str | None, type_: str, data: dict[str, Any], tail: str | None
) -> Event:
    """An event; without `tail` its JSON is made when first asked for (a delta's data is
    a fresh dict nobody changes after publishing, so later is the same text)."""
    event = Event(event_id=event_id, turn_id=turn_id, type=type_, data=data)
    if tail is not None:
        event._text = '{"event_id":%d%s' % (event_id, tail)
    return event


def encoded(event: dict[str, Any]) -> str:
    """An event's JSON: the text made once for the event, or encoded now."""
    if isinstance(event, Event):
        return event.encoded
    return _dumps(event)


@dataclass
class TurnState:
    """What a snapshot shows: the part of the turn not yet saved as a message, plus ids."""

    turn_id: str
    history_boundary: int | None = None
    step: int = 0
    # The live text as the deltas came: `+=` on an attribute copies the whole text per
    # delta (quadratic in the answer's length); joined only for a snapshot.
    content_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_id -> card state
    pending_approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    saved_message_ids: list[int] = field(default_factory=list)
    finished: bool = False
    error: dict[str, Any] | None = None
    # A compare turn: each lane's route (the `lanes` event) and its own state, folded from
    # the events that carry its `lane`. A lane is finished at its `done` or `error`.
    lane_routes: list[dict[str, Any]] = field(default_factory=list)
    lanes: dict[int, TurnState] = field(default_factory=dict)
    # A research run's progress view as its newest research_* event drew it (each carries
    # the whole view, `progress`): a snapshot redraws it whole.
    research: dict[str, Any] | None = None

    def apply(self, type_: str, data: dict[str, Any]) -> None:
        """Fold one event into the state (the same rules the HTML view follows)."""
        lane = data.get("lane")
        if lane is not None and type(lane) is int:
            self._apply_lane(lane, type_, data)
        elif type_ == "lanes":
            self.lane_routes = list(data.get("lanes") or [])
        else:
            self._fold(type_, data)

    def _fold(self, type_: str, data: dict[str, Any]) -> None:
        if type_ == "turn_start":
            self.history_boundary = data.get("history_boundary")
        elif type_ in ("content", "reasoning"):
            if data.get("step", self.step) != self.step:
                self.step, self.content_parts, self.reasoning_parts = data["step"], [], []
            (self.content_parts if type_ == "content" else self.reasoning_parts).append(
                data["delta"]
            )
        elif type_ == "tool_preparing":
            self.tools.setdefault(
                data["call_id"],
                {"call_id": data["call_id"], "name": data["name"], "status": "preparing"},
            )
        elif type_ == "tool_approval":
            self.pending_approvals[data["call_id"]] = data
            self.tools.setdefault(
                data["call_id"], {"call_id": data["call_id"], "name": data["name"]}
            )["status"] = "approval"
        elif type_ == "tool_start":
            self.pending_approvals.pop(data["call_id"], None)
            card = self.tools.setdefault(
                data["call_id"], {"call_id": data["call_id"], "name": data["name"]}
            )
            card.update(status="running", arguments=data.get("arguments"))
        elif type_ == "tool_end":
            card = self.tools.setdefault(
                data["call_id"], {"call_id": data["call_id"], "name": data["name"]}
            )
            card.update(
                status="done" if data.get("ok") else "failed",
                result=data.get("result"),
                duration_ms=data.get("duration_ms"),
            )
            if "arguments" in data:
                card["arguments"] = data["arguments"]
            if data.get("error_code"):
                card["error_code"] = data["error_code"]
            if data.get("display") is not None:
                card["display"] = data["display"]
        elif type_ == "tool_output":
            # What a running call printed so far (run_python), so a snapshot redraws it.
            running = self.tools.get(data["call_id"])
            if running is not None:
                running["live_output"] = running.get("live_output", "") + data.get("text", "")
        elif type_ == "message_saved":
            # The step's text now lives in a saved message: the live part starts over.
            self.saved_message_ids.append(data["message_id"])
            if data.get("role") == "assistant":
                self.content_parts, self.reasoning_parts = [], []
            if data.get("role") == "tool":
                self.tools.pop(str(data.get("tool_call_id")), None)
            if data.get("role") == "assistant" and data.get("tool_calls"):
                for call_id in data["tool_calls"]:
                    self.tools.setdefault(call_id, {"call_id": call_id, "status": "preparing"})
        elif type_.startswith("research_"):
            self.research = data.get("progress")
        elif type_ == "error":
            self.error = data
        elif type_ == TERMINAL:
            self.finished = True

    def _apply_lane(self, lane: int, type_: str, data: dict[str, Any]) -> None:
        state = self.lanes.get(lane)
        if state is None:
            state = self.lanes[lane] = TurnState(turn_id=self.turn_id)
        if type_ == "error":
            state.error, state.finished = data, True
        elif type_ == "done":
            state.finished = True
        else:
            state._fold(type_, data)
        # The turn's table of waiting approvals holds every lane's too: an approval is
        # answered by call id, whichever lane asked (the Redis backend reads it here).
        if type_ == "tool_approval":
            self.pending_approvals[data["call_id"]] = data
        elif type_ == "tool_start":
            self.pending_approvals.pop(data["call_id"], None)

    @property
    def content(self) -> str:
        return "".join(self.content_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    def snapshot(self) -> dict[str, Any]:
        snapshot: dict[str, Any] = {
            "turn_id": self.turn_id,
            "history_boundary": self.history_boundary,
            "step": self.step,
            "content": self.content,
            "reasoning": self.reasoning,
            "tools": list(self.tools.values()),
            "pending_approvals": list(self.pending_approvals.values()),
            "saved_message_ids": list(self.saved_message_ids),
            "finished": self.finished,
        }
        if self.research is not None:
            snapshot["research"] = self.research
        if not self.lane_routes and not self.lanes:
            return snapshot
        # A compare turn: the turn's own approvals are its lanes', shown in their lanes.
        snapshot["pending_approvals"] = [
            item for item in snapshot["pending_approvals"] if item.get("lane") is None
        ]
        snapshot["lanes"] = [
            {
                **route,
                **self.lanes.get(route["lane"], TurnState(turn_id=self.turn_id)).snapshot(),
                "error": self.lanes[route["lane"]].error if route["lane"] in self.lanes else None,
            }
            for route in self.lane_routes
        ]
        return snapshot

    @classmethod
    def restore(cls, data: dict[str, Any]) -> "TurnState":
        """The state a `snapshot()` (plus its error) stood for (the Redis backend stores it)."""
        state = cls(
            turn_id=data["turn_id"],
            history_boundary=data.get("history_boundary"),
            step=data.get("step", 0),
            content_parts=[data["content"]] if data.get("content") else [],
            reasoning_parts=[data["reasoning"]] if data.get("reasoning") else [],
            tools={card["call_id"]: card for card in data.get("tools", [])},
            pending_approvals={item["call_id"]: item for item in data.get("pending_approvals", [])},
            saved_message_ids=list(data.get("saved_message_ids", [])),
            finished=bool(data.get("finished")),
            error=data.get("error"),
            research=data.get("research"),
        )
        for lane in data.get("lanes") or []:
            state.lane_routes.append(
                {
                    key: lane[key]
                    for key in ("lane", "endpoint_id", "model", "endpoint")
                    if key in lane
                }
            )
            state.lanes[lane["lane"]] = lane_state = cls.restore(
                {**lane, "turn_id": data["turn_id"]}
            )
            for item in lane_state.pending_approvals.values():
                state.pending_approvals[item["call_id"]] = item
        return state


class Channel(Protocol):
    """A chat's live events, whichever backend holds them: `ChatChannel` in this process's
    memory, or `redis_channel.RedisChannel`. A `Turn` publishes to it, clients subscribe."""

    chat_id: str
    state: TurnState | None
    subscribers: set[Subscription]

    @property
    def last_event_id(self) -> int: ...

    def begin_turn(self, turn_id: str, request_id: str | None = None) -> None:
        """A new turn starts: events of the old one are no longer replayed."""

    def publish(self, turn_id: str | None, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Number the event and hand it to every subscriber (on every process)."""

    def subscribe(
        self, last_event_id: int | None = None
    ) -> tuple[Subscription, list[dict[str, Any]]]:
        """A new subscription plus what the client missed since `last_event_id`."""

    def unsubscribe(self, subscription: Subscription) -> None:
        """The client is gone."""

    def confirm_lease(self, turn_id: str) -> bool:
        """Whether the turn may still publish and save (False: it was taken over)."""

    def snapshot_event(self) -> dict[str, Any]:
        """The turn so far, as one `snapshot` event."""


class Subscription:
    """One client's view of a channel: iterate it for events (blocking, gevent-friendly)."""

    def __init__(self, channel: Channel, maxsize: int):
        self.channel = channel
        self.queue: Queue = Queue(maxsize=maxsize)
        self.resync = False
        self.closed = False
        # Events up to this id were already given to the client (as a backlog or a
        # snapshot): the live queue may still hold some of them, and they are skipped.
        self.skip_through = 0

    def deliver(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(event)
        except Exception:  # gevent.queue.Full: drop the backlog, catch up by snapshot
            self.resync = True
            while True:
                try:
                    self.queue.get_nowait()
                except Empty:
                    break

    def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event, a snapshot after an overflow, or None on timeout/close."""
        while True:
            if self.resync:
                return self._resync()
            try:
                event = self.queue.get(timeout=timeout)
            except Empty:
                return None
            if event is None:
                return None
            if self.resync:  # overflowed while we waited: this event may be stale
                return self._resync()
            if event["event_id"] > self.skip_through:
                return event

    def _resync(self) -> dict[str, Any]:
        """A snapshot standing for everything queued so far; what is queued is dropped."""
        self.resync = False
        while True:
            try:
                self.queue.get_nowait()
            except Empty:
                break
        snapshot = self.channel.snapshot_event()
        self.skip_through = max(self.skip_through, snapshot["event_id"] or 0)
        return snapshot

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.channel.unsubscribe(self)
            try:
                self.queue.put_nowait(None)
            except Exception:
                pass


class ChatChannel:
    """Live events of one chat."""

    def __init__(self, chat_id: str, *, max_events: int, max_bytes: int, queue_size: int):
        self.chat_id = chat_id
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.queue_size = queue_size
        # Ids start from the clock so they keep increasing for a chat whose channel was
        # dropped and made again (or across a restart): a client's last id stays older.
        self.last_event_id = int(time.time() * 1000)
        self.buffer: deque[tuple[dict[str, Any], int]] = deque()
        self.buffer_bytes = 0
        self.dropped_through = 0  # highest event id evicted from the buffer
        self.state: TurnState | None = None
        self.subscribers: set[Subscription] = set()
        self.running = False
        self.finished_at: float | None = None
        self.idle = gevent.event.Event()
        self.idle.set()

    # --- producer side --------------------------------------------------------------------

    def begin_turn(self, turn_id: str, request_id: str | None = None) -> None:
        self.buffer.clear()
        self.buffer_bytes = 0
        self.dropped_through = self.last_event_id
        self.state = TurnState(turn_id=turn_id)
        self.running = True
        self.finished_at = None
        self.idle.clear()

    def publish(self, turn_id: str | None, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Number the event, keep it in the buffer, hand it to every subscriber."""
        check_event_type(type_)
        self.last_event_id += 1
        if type_ in DELTAS and "delta" in data:
            # The buffer's byte bound needs an estimate only: the text plus the envelope.
            event = make_event(self.last_event_id, turn_id, type_, data, None)
            size = len(data["delta"]) + 96
        else:
            tail = event_tail(turn_id, type_, data)
            event = make_event(self.last_event_id, turn_id, type_, data, tail)
            size = len(tail) + 24
        if self.state is not None and turn_id == self.state.turn_id:
            self.state.apply(type_, data)
        self.buffer.append((event, size))
        self.buffer_bytes += size
        while self.buffer and (
            len(self.buffer) > self.max_events or self.buffer_bytes > self.max_bytes
        ):
            old, old_size = self.buffer.popleft()
            self.buffer_bytes -= old_size
            self.dropped_through = old["event_id"]
        for subscriber in tuple(self.subscribers):
            subscriber.deliver(event)
        if type_ == TERMINAL:
            self._forget_finished_events(event, size)
            self.running = False
            self.finished_at = time.monotonic()
            self.idle.set()
        return event

    def _forget_finished_events(self, terminal: Event, size: int) -> None:
        """Keep only the turn's last event once it has ended.

        Its answer is saved by now, and its snapshot (finished, with the saved messages'
        ids) stands for everything before the last event: a client that reconnects later
        gets that, as after an overflow. Kept until the channel is reaped
        (NUMI_TURN_RETENTION_SECONDS), the deltas of 500 finished turns held 5 MiB of small
        objects scattered over the heap the streams had grown, and pinned far more of it:
        RSS after 500 streams was 40 MiB above the start (bench/PROFILE.md, issue 45)."""
        self.buffer.clear()
        self.buffer.append((terminal, size))
        self.buffer_bytes = size
        self.dropped_through = terminal["event_id"] - 1

    # --- consumer side --------------------------------------------------------------------

    def subscribe(
        self, last_event_id: int | None = None
    ) -> tuple[Subscription, list[dict[str, Any]]]:
        """A new subscription plus what the client missed since `last_event_id`.

        With no last event id the client has only what the database shows, so a running
        turn is sent as a snapshot. With one that the buffer still covers, the missed
        events are replayed exactly; otherwise a snapshot replaces them.
        """
        subscription = Subscription(self, self.queue_size)
        self.subscribers.add(subscription)
        backlog: list[dict[str, Any]] = []
        if last_event_id is not None and last_event_id >= self.last_event_id:
            return subscription, backlog
        if last_event_id is not None and last_event_id >= self.dropped_through:
            backlog = [event for event, _ in self.buffer if event["event_id"] > last_event_id]
        elif self.state is not None:
            backlog = [self.snapshot_event()]
        return subscription, backlog

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscribers.discard(subscription)

    def confirm_lease(self, turn_id: str) -> bool:
        """Whether the turn may still save: in one process nobody else can take the chat."""
        return True

    def snapshot_event(self) -> dict[str, Any]:
        """A synthetic event standing for everything up to `last_event_id`."""
        data = self.state.snapshot() if self.state else {}
        turn_id = self.state.turn_id if self.state else None
        return {
            "event_id": self.last_event_id,
            "turn_id": turn_id,
            "type": "snapshot",
            "data": data,
        }
