"""TurnManager: starts turns in greenlets and routes their events to subscribers.

Live turn state lives here, never in the database and never in module globals: one
manager per app (`app.extensions["numi.turns"]`). At most one turn runs per chat. A turn
outlives the browser that started it; only `stop()` cancels it. After a restart nothing
is running: the database is the truth.

Channels come from one of two backends with one interface: in-process (`ChatChannel`, the
default) or Redis (`shared.RedisChannel`, with NUMI_REDIS_URL), where a lease makes "one
turn per chat" hold across processes and stop/approve travel to the owning process.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import gevent
import gevent.event
import gevent.lock

from ..errors import NumiError, turn_running
from .channel import ChatChannel, Subscription

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)


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


class Turn:
    """A running turn as its producer sees it: emit events, check for cancellation."""

    def __init__(self, manager: "TurnManager", channel: ChatChannel, request: TurnRequest):
        self.id = uuid.uuid4().hex[:16]
        self.manager = manager
        self.channel = channel
        self.request = request
        self.cancelled = False
        self.started_at = time.time()
        self.greenlet: gevent.Greenlet | None = None
        self._cancel_callbacks: list[Callable[[], None]] = []
        self._pending: dict[str, Any] | None = None  # coalesced delta not yet published
        self._flush_timer = None  # the hub's loop timer of a coalesced delta's flush
        self._last_delta_at = 0.0  # monotonic time the last delta event went out
        self.approvals: dict[str, gevent.event.AsyncResult] = {}
        self.approval_digests: dict[str, str] = {}  # call_id -> digest of the call its card shows

    # --- events -----------------------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Publish an event now (after any coalesced delta, to keep the order)."""
        self.flush()
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
        interval = self.manager.frame_interval
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
        if pending is not None:
            self._last_delta_at = time.monotonic()
            self.channel.publish(self.id, pending["type"], {"delta": pending["delta"], "step": pending["step"]})

    # --- cancellation -------------------------------------------------------------------------

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        for callback in tuple(self._cancel_callbacks):
            try:
                callback()
            except Exception:  # closing a stream that is already closed, and the like
                log.debug("cancel callback failed", exc_info=True)
        for result in self.approvals.values():
            if not result.ready():
                result.set("stopped")  # not a denial: the user stopped the whole turn

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when the turn is cancelled; returns a function that unregisters it."""
        self._cancel_callbacks.append(callback)
        if self.cancelled:
            callback()
        return lambda: self._cancel_callbacks.remove(callback) if callback in self._cancel_callbacks else None

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


class StartGate:
    """Turn starts prepare one at a time (see TurnManager.starts).

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


class TurnManager:
    """One per app: the running turns and the chats' live channels."""

    def __init__(self, app: "Flask"):
        self.app = app
        config = app.config
        self.frame_interval = config["NUMI_FRAME_INTERVAL_MS"] / 1000.0
        self.retention = config["NUMI_TURN_RETENTION_SECONDS"]
        self._channel_options = {
            "max_events": config["NUMI_TURN_BUFFER_EVENTS"],
            "max_bytes": config["NUMI_TURN_BUFFER_BYTES"],
            "queue_size": config["NUMI_SUBSCRIBER_QUEUE"],
        }
        self.channels: dict[str, ChatChannel] = {}
        self.turns: dict[str, Turn] = {}  # chat_id -> turn running in this process
        # The gate of turns preparing (reading the chat, saving the question, building the
        # request). Every query yields to the hub and waits behind whatever else is ready:
        # when a hundred sends arrive together, a page request's queries would each wait
        # behind a hundred starts. Queued here, they wait behind one; the starts, which
        # share one core anyway, finish no later on the whole and the first ones sooner.
        # A start holds a database connection throughout, so this also keeps a burst from
        # emptying the pool. (bench: `GET /` p95 during 100 turns; the turns' own latency.)
        self.starts = StartGate()
        self.shared = None
        if config.get("NUMI_REDIS_URL"):
            from .shared import SharedTurns

            self.shared = SharedTurns(self, config)
        self._reaper: gevent.Greenlet | None = None
        # Which function produces a turn; the agent by default (kept swappable so a later
        # runtime, e.g. a remote worker, plugs in without touching the web layer).
        self.producer: Callable[[Turn], None] | None = None
        # Called with each ended turn, after its turn_end, in the process that ran it (the
        # web layer starts the chat's next queued follow-up from here).
        self.turn_end_hooks: list[Callable[[Turn], None]] = []

    def channel(self, chat_id: str) -> ChatChannel:
        if self.shared is not None:
            return self.shared.channel(chat_id)
        channel = self.channels.get(chat_id)
        if channel is None:
            channel = self.channels[chat_id] = ChatChannel(chat_id, **self._channel_options)
        return channel

    def is_running(self, chat_id: str) -> bool:
        """Whether a turn runs in the chat, in this process or (with Redis) any other."""
        if chat_id in self.turns:
            return True
        return self.shared is not None and bool(self.shared.running([chat_id]))

    def running_chat_ids(self, chat_ids) -> set[str]:
        """Which of these chats have a running turn (one Redis round trip for them all)."""
        chat_ids = list(chat_ids)
        running = {chat_id for chat_id in chat_ids if chat_id in self.turns}
        if self.shared is not None:
            running |= self.shared.running([chat_id for chat_id in chat_ids if chat_id not in running])
        return running

    def last_event_id(self, chat_id: str) -> int:
        """The chat's newest event id: a client that follows from it misses nothing."""
        if self.shared is not None:
            return self.shared.last_event_id(chat_id, start=True)
        return self.channel(chat_id).last_event_id

    def running_among(self, chat_ids) -> set[str]:
        """Which of `chat_ids` have a running turn: one call for a page of the sidebar."""
        return self.running_chat_ids(chat_ids)

    def get(self, chat_id: str) -> Turn | None:
        return self.turns.get(chat_id)

    def start(self, request: TurnRequest) -> Turn | None:
        """Start a turn for a chat the caller has already checked the user owns.

        Returns None when the chat's running turn is this very request (the same
        request_id, sent twice or to two processes at once): the retried send follows that
        turn, whose `accepted` event carries the saved question, instead of failing.
        """
        running = self.turns.get(request.chat_id)
        if running is not None:
            if request.request_id and running.request.request_id == request.request_id:
                return None
            raise turn_running()
        channel = self.channel(request.chat_id)
        turn = Turn(self, channel, request)
        try:
            channel.begin_turn(turn.id, request.request_id)
        except NumiError as exc:
            if request.request_id and getattr(exc, "request_id", None) == request.request_id:
                return None
            raise
        self.turns[request.chat_id] = turn
        turn.greenlet = gevent.spawn(self._run, turn)
        if self.shared is None:
            self._ensure_reaper()
        return turn

    def _run(self, turn: Turn) -> None:
        producer = self.producer
        if producer is None:
            from ..agent.runtime import run_turn

            producer = run_turn
        try:
            with self.app.app_context():
                producer(turn)
        except Exception:
            log.exception("turn %s of chat %s crashed", turn.id, turn.request.chat_id)
            turn.emit("error", {"code": "internal_error", "message": "The turn failed on the server. The log has the details."})
        finally:
            self.turns.pop(turn.request.chat_id, None)
            turn.emit("turn_end", {})
            after = getattr(turn, "after_end", None)
            if after is not None:
                gevent.spawn(self._run_after, turn, after)
            for hook in self.turn_end_hooks:
                gevent.spawn(self._run_after, turn, lambda hook=hook: hook(turn))

    def _run_after(self, turn: Turn, action: Callable[[], None]) -> None:
        """Work that follows a turn (the title) and publishes on the chat's channel."""
        try:
            with self.app.app_context():
                action()
        except Exception:
            log.exception("post-turn work failed for chat %s", turn.request.chat_id)

    def stop(self, chat_id: str) -> bool:
        """Cancel the chat's running turn (wherever it runs); returns whether one was running."""
        if self.stop_local(chat_id):
            return True
        return self.shared is not None and self.shared.stop(chat_id)

    def stop_local(self, chat_id: str) -> bool:
        turn = self.turns.get(chat_id)
        if turn is None:
            return False
        turn.cancel()
        return True

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None = None) -> bool:
        """Answer a waiting approval (wherever its turn runs); False when nothing waits under
        `call_id`. An approval must carry the digest of the call its card showed (a denial
        needs none)."""
        if chat_id not in self.turns and self.shared is not None:
            return self.shared.approve(chat_id, call_id, decision, digest)
        return self.approve_local(chat_id, call_id, decision, digest)

    def approve_local(self, chat_id: str, call_id: str, decision: str, digest: str | None = None) -> bool:
        turn = self.turns.get(chat_id)
        if turn is None:
            return False
        result = turn.approvals.get(call_id)
        if result is None or result.ready():
            return False
        expected = turn.approval_digests.get(call_id)
        if decision == "approve" and expected is not None and digest != expected:
            raise NumiError("approval_mismatch",
                            "That approval does not match the call shown on its card; nothing was run.", 409)
        result.set("approve" if decision == "approve" else "deny")
        return True

    def subscribe(self, chat_id: str, last_event_id: int | None = None) -> tuple[Subscription, list[dict]]:
        return self.channel(chat_id).subscribe(last_event_id)

    def status(self, chat_id: str) -> dict[str, Any]:
        if self.shared is not None:
            return self.shared.status(chat_id)
        turn = self.turns.get(chat_id)
        channel = self.channels.get(chat_id)
        return {
            "running": turn is not None,
            "turn_id": turn.id if turn else (channel.state.turn_id if channel and channel.state else None),
            "last_event_id": channel.last_event_id if channel else 0,
            "started_at": turn.started_at if turn else None,
        }

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.dead:
            self._reaper = gevent.spawn(self._reap)

    def _reap(self) -> None:
        """Drop idle channels of finished turns once late reconnects are no longer likely."""
        while self.channels:
            gevent.sleep(min(self.retention, 30) or 1)
            now = time.monotonic()
            for chat_id, channel in list(self.channels.items()):
                expired = channel.finished_at is not None and now - channel.finished_at > self.retention
                if not channel.running and not channel.subscribers and (expired or channel.state is None):
                    self.channels.pop(chat_id, None)
