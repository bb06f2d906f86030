"""A turn and what it is made of: the request that starts it (`TurnRequest`), the running
turn its producer writes to (`Turn`), and the gate that lets turn starts prepare one at a
time (`StartGate`).

A `Turn` knows its channel and nothing of the manager that runs it: the producer (the
agent, injected into the TurnManager at app start) emits events, coalesces deltas, waits
for approvals and watches for cancellation through it, and passes `turn.start_gate` while
it prepares.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
import gevent.lock

from .channel import Channel

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """The turn lost its chat's lease (another process holds the chat, or the lease lapsed
    while this process stalled): it must stop at once, saving and publishing nothing."""


@dataclass
class TurnRequest:
    """What a client asked for: validated by the web layer before a turn starts."""

    user_id: int
    chat_id: str
    message: str
    attachments: list[int] = field(default_factory=list)
    request_id: str | None = None
    timezone: str | None = None
    tz_offset_minutes: int | None = None
    is_admin: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # Kept with the question when it is saved (chat.request_meta: its `request` part).
    metadata: dict[str, Any] = field(default_factory=dict)
    # The start found no saved question of this request_id (numi.agent.starting): the
    # turn need not look again. A save racing it from another process still fails on the
    # unique (chat_id, request_id) index, which the agent handles as a resend.
    question_new: bool = False


class StartGate:
    """Turn starts prepare one at a time (the manager holds one gate, `TurnManager.starts`,
    and hands it to each turn as `Turn.start_gate`).

    A start that holds the gate longer than `stuck_after` seconds (a slow address lookup,
    a large attachment to read) is taken as stuck: the starts waiting behind it go ahead
    without the gate instead of stalling, and order returns once it leaves. How long a
    start waits is no sign of trouble: in a burst of a hundred the last waits for all
    ninety-nine, each making progress."""

    def __init__(self, stuck_after: float = 2.0):
        self.stuck_after = stuck_after
        self._lock = gevent.lock.BoundedSemaphore(1)
        self._held_since: float | None = None

    def enter(self) -> bool:
        """Wait for the gate: True when this start holds it (and must `leave()`), False
        when it goes ahead past a stuck holder."""
        while not self._lock.acquire(timeout=self.stuck_after / 4):
            held_since = self._held_since
            if held_since is not None and time.monotonic() - held_since > self.stuck_after:
                return False
        self._held_since = time.monotonic()
        return True

    def leave(self) -> None:
        self._held_since = None
        self._lock.release()

    @property
    def free(self) -> bool:
        return not self._lock.locked()


class Turn:
    """A running turn as its producer sees it: emit events, check for cancellation."""

    # Work the producer leaves for after the turn's end (the title), run by the manager;
    # set on the turn only when there is some.
    after_end: Callable[[], None] | None

    def __init__(
        self,
        channel: Channel,
        request: TurnRequest,
        *,
        frame_interval: float = 0.0,
        start_gate: StartGate | None = None,
    ):
        self.id = uuid.uuid4().hex[:16]
        self.channel = channel
        self.request = request
        self.frame_interval = frame_interval  # seconds between coalesced delta events
        # The gate its producer passes while it prepares (see StartGate); None: no gate.
        self.start_gate = start_gate
        self.cancelled = False
        # Why it was cancelled: "user" (Stop), "shutdown" (the server is stopping).
        self.cancel_reason: str | None = None
        self.lost = False  # the lease is gone: nothing more is published or saved
        # Its producer waits for the database to take a save (its answer is kept in memory
        # meanwhile): a shutdown cancels it at once rather than after the grace, and the
        # producer keeps the answer on disk (agent/durable.py).
        self.waiting_for_database = False
        self.started_at = time.time()
        # The last `error` event it emitted ({code, message}): how a turn-end hook tells a
        # failed turn from an answered one (a scheduled task's run records it).
        self.last_error: dict[str, Any] | None = None
        self.greenlet: gevent.Greenlet | None = None
        self._cancel_callbacks: list[Callable[[], None]] = []
        self._pending: dict[str, Any] | None = None  # coalesced delta not yet published
        self._flush_timer = None  # the hub's loop timer of a coalesced delta's flush
        self._last_delta_at = 0.0  # monotonic time the last delta event went out
        self.approvals: dict[str, gevent.event.AsyncResult] = {}
        self.approval_digests: dict[str, str] = {}  # call_id -> digest of the call its card shows
        # A compare turn's lanes (`LaneTurn`, by lane number): Stop with a lane stops one.
        self.lanes: dict[int, Turn] = {}
        self.lane: int | None = None  # set on a LaneTurn: its events carry `lane`

    # --- events -----------------------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Publish an event now (after any coalesced delta, to keep the order)."""
        self.flush()
        if type_ == "error":
            self.last_error = data
        if self.lane is not None:
            data = {**data, "lane": self.lane}
        if self.lost:
            return {"event_id": None, "turn_id": self.id, "type": type_, "data": data}
        return self.channel.publish(self.id, type_, data)

    def emit_delta(self, type_: str, delta: str, step: int) -> None:
        """Queue a content/reasoning delta; deltas are merged into one event per frame.

        A fast model writes hundreds of tokens a second; one event (and one WebSocket
        message) per token would cost more than the tokens. So deltas of the same type and
        step are published at most once per frame interval. The interval throttles rather
        than delays: a delta arriving after a quiet interval goes out at once, so a slow
        model's tokens are not held back.
        """
        pending = self._pending
        if pending is not None and (pending["type"] != type_ or pending["step"] != step):
            self.flush()
            pending = None
        if pending is not None:
            pending["delta"] += delta
            return
        self._pending = {"type": type_, "step": step, "delta": delta}
        interval = self.frame_interval
        wait = self._last_delta_at + interval - time.monotonic()
        if interval <= 0 or wait <= 0:
            self.flush()
        elif self._flush_timer is None:
            # A plain loop timer whose callback runs in the hub, not a greenlet per delta
            # (spawn_later + kill was most of the coalescing cost, bench/PROFILE.md): a
            # channel's publish() never blocks or yields, so the hub may run it.
            timer = self._flush_timer = gevent.get_hub().loop.timer(wait)
            timer.start(self._timed_flush)

    def _timed_flush(self) -> None:
        try:
            self.flush()
        except Exception:  # in the hub: report it, never let it reach the loop
            log.exception("flushing a delta of turn %s failed", self.id)

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        timer, self._flush_timer = self._flush_timer, None
        if timer is not None:
            timer.stop()
            timer.close()
        if pending is not None and not self.lost:
            self._last_delta_at = time.monotonic()
            data = {"delta": pending["delta"], "step": pending["step"]}
            if self.lane is not None:
                data["lane"] = self.lane
            self.channel.publish(self.id, pending["type"], data)

    # --- cancellation -------------------------------------------------------------------------

    def confirm_lease(self) -> None:
        """Before each save: raise LeaseLost unless the turn still holds its chat (with
        Redis, checked there; a stalled process finds out here before it writes)."""
        if self.lost or not self.channel.confirm_lease(self.id):
            self.lose()
            raise LeaseLost(self.id)

    def lose(self) -> None:
        """Stop at once: the chat is no longer this turn's (see LeaseLost)."""
        if not self.lost:
            self.lost = True
            self._pending = None
            self.cancel("lost")

    def cancel(self, reason: str = "user") -> None:
        if self.cancelled:
            return
        self.cancelled = True
        self.cancel_reason = reason
        for callback in tuple(self._cancel_callbacks):
            try:
                callback()
            except Exception:  # closing a stream that is already closed, and the like
                log.debug("cancel callback failed", exc_info=True)
        for call_id in tuple(self._stopped_approvals()):
            result = self.approvals.get(call_id)
            if result is not None and not result.ready():
                result.set("stopped")  # not a denial: the user stopped the whole turn

    def _stopped_approvals(self) -> Iterable[str]:
        """The calls whose waiting approvals this turn's Stop answers: all of them."""
        return self.approvals

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when the turn is cancelled; returns a function that unregisters it."""
        self._cancel_callbacks.append(callback)
        if self.cancelled:
            callback()
        return lambda: (
            self._cancel_callbacks.remove(callback) if callback in self._cancel_callbacks else None
        )

    def wait_for_approval(self, call_id: str, timeout: float, digest: str | None = None) -> str:
        """Block this greenlet (not the hub) until the user approves or denies, or timeout.

        One approval per call id: a second wait on an id already waiting is denied, never
        shared. With `digest`, only an approval that names that digest counts."""
        if call_id in self.approvals:
            return "deny"
        result = self.approvals[call_id] = gevent.event.AsyncResult()
        if digest is not None:
            self.approval_digests[call_id] = digest
        try:
            return result.get(timeout=timeout)
        except gevent.Timeout:
            return "timeout"
        finally:
            self.approvals.pop(call_id, None)
            self.approval_digests.pop(call_id, None)


class LaneTurn(Turn):
    """One lane of a compare turn (one question, several routes answering at once): its
    own stream, deltas, cancellation and approvals, on the turn's channel and id.

    Every event it emits carries `lane` in its data. Stopping the turn stops every lane;
    `cancel()` on a lane stops only that one. Approvals live in the turn's table (the
    manager answers them by call id) but a lane's Stop releases only its own. A lost lease
    is the turn's: a lane is lost when its turn is."""

    lane: int  # always set on a lane (a Turn's is None)

    def __init__(self, parent: Turn, lane: int):
        super().__init__(parent.channel, parent.request, frame_interval=parent.frame_interval)
        self.id = parent.id
        self.parent = parent
        self.lane = lane
        self.started_at = parent.started_at
        self.approvals = parent.approvals
        self.approval_digests = parent.approval_digests
        self._calls: set[str] = set()  # this lane's calls waiting for approval
        parent.lanes[lane] = self
        parent.on_cancel(lambda: self.cancel(parent.cancel_reason or "user"))

    @property
    def lost(self) -> bool:
        return self._lost or self.parent.lost

    @lost.setter
    def lost(self, value: bool) -> None:
        self._lost = value

    @property
    def after_end(self):
        return getattr(self.parent, "after_end", None)

    @after_end.setter
    def after_end(self, action) -> None:
        # The first lane to schedule post-turn work (the title) has it; the others' is
        # the same work for the same chat.
        if getattr(self.parent, "after_end", None) is None:
            self.parent.after_end = action

    def confirm_lease(self) -> None:
        self.parent.confirm_lease()

    def lose(self) -> None:
        self.parent.lose()

    def _stopped_approvals(self) -> Iterable[str]:
        # The approvals are the turn's, shared by every lane: a lane's Stop answers its own.
        return self._calls

    def wait_for_approval(self, call_id: str, timeout: float, digest: str | None = None) -> str:
        self._calls.add(call_id)
        try:
            return super().wait_for_approval(call_id, timeout, digest)
        finally:
            self._calls.discard(call_id)
