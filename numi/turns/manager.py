"""TurnManager: starts turns in greenlets and routes their events to subscribers.

Live turn state lives here, never in the database and never in module globals: one
manager per app (`numi.extensions.turn_manager()`). At most one turn runs per chat. A turn
outlives the browser that started it; only `stop()` cancels it. After a restart nothing
is running: the database is the truth.

The manager knows neither the agent nor the web layer. The app factory hands it the
producer (the function that runs a turn: `numi.agent.producer.run_turn`) and the turn-end
hooks (the follow-up queue, `numi.agent.sending.queue_after_turn`). The chats' channels and
the turns of other processes come from a turn table (`table.TurnTable`): in-process
(`LocalTurns`, the default) or Redis (`shared.SharedTurns`, with NUMI_REDIS_URL), where a
lease makes "one turn per chat" hold across processes and stop/approve travel to the
owning process. This process's own running turns are the manager's (`turns`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import gevent

from ..heap import HeapRelease
from ..errors import NumiError, first_line, is_storage_failure, server_stopping, turn_running
from .channel import Channel, Subscription
from .shared import SharedTurns
from .table import LocalTurns, TurnTable
from .turn import StartGate, Turn, TurnRequest

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)

Producer = Callable[[Turn], None]


class TurnManager:
    """One per app: this process's running turns and the table of the chats' channels."""

    def __init__(
        self,
        app: Flask,
        *,
        producer: Producer,
        turn_end_hooks: Iterable[Callable[[Turn], None]] = (),
        stopped_hooks: Iterable[Callable[[], None]] = (),
        change_hooks: Iterable[Callable[[Turn], None]] = (),
    ):
        self.app = app
        # Run once `shutdown` has stopped and saved the turns (the web layer's: close the
        # WebSockets with 1012); handed down by the app factory, as the producer is.
        self.stopped_hooks = list(stopped_hooks)
        config = app.config
        self.frame_interval = config["NUMI_FRAME_INTERVAL_MS"] / 1000.0
        channel_options = {
            "max_events": config["NUMI_TURN_BUFFER_EVENTS"],
            "max_bytes": config["NUMI_TURN_BUFFER_BYTES"],
            "queue_size": config["NUMI_SUBSCRIBER_QUEUE"],
        }
        self.turns: dict[str, Turn] = {}  # chat_id -> turn running in this process
        # The gate of turns preparing (reading the chat, saving the question, building the
        # request), handed to each turn as `start_gate`. Every query yields to the hub and
        # waits behind whatever else is ready: when a hundred sends arrive together, a page
        # request's queries would each wait behind a hundred starts. Queued here, they wait
        # behind one; the starts, which share one core anyway, finish no later on the whole
        # and the first ones sooner. A start holds a database connection throughout, so this
        # also keeps a burst from emptying the pool. (bench: `GET /` p95 during 100 turns;
        # the turns' own latency.)
        self.starts = StartGate()
        self.table: TurnTable
        if config.get("NUMI_REDIS_URL"):
            self.table = SharedTurns(self, config, channel_options)
        else:
            self.table = LocalTurns(
                retention=config["NUMI_TURN_RETENTION_SECONDS"], channel_options=channel_options
            )
        # The function that runs a turn to its end (the agent's run_turn; a later runtime,
        # e.g. a remote worker, plugs in here without touching the web layer).
        self.producer = producer
        # Called with each ended turn, after its turn_end, in the process that ran it (the
        # follow-up queue starts the chat's next queued message from here).
        self.turn_end_hooks: list[Callable[[Turn], None]] = list(turn_end_hooks)
        # Called with a turn when its chat's running state or title changes: as it starts,
        # as it ends, after its post-turn work (the title). The web layer's: the sidebars
        # of the user's open pages are told. They must not block.
        self.change_hooks: list[Callable[[Turn], None]] = list(change_hooks)
        self.stopping = False  # the server is shutting down: no new turns (shutdown())
        # The work that follows ended turns (titles, turn-end hooks), while it runs: an app
        # that ends inside a process that goes on stops it (`stop_all`).
        self.after_work: set[gevent.Greenlet] = set()
        # Once the last running turn has ended and its after-work is done: what the turns
        # left (cyclic garbage, glibc's free pages) given back (numi/heap.py, issue 45).
        self.heap = HeapRelease(
            running=lambda: bool(self.turns), settling=lambda: bool(self.after_work)
        )

    def channel(self, chat_id: str) -> Channel:
        return self.table.channel(chat_id)

    def is_running(self, chat_id: str) -> bool:
        """Whether a turn runs in the chat, in this process or (with Redis) any other.
        Raises live_unavailable (503) when Redis cannot say: a change that must not race a
        turn (a send, an edit, a delete) is refused rather than guessed."""
        return chat_id in self.turns or bool(self.table.running([chat_id]))

    def running_or_unknown(self, chat_id: str) -> bool | None:
        """As is_running for a page that shows it: None when Redis cannot say (the page
        still renders and says so)."""
        try:
            return self.is_running(chat_id)
        except NumiError as exc:
            if exc.code != "live_unavailable":
                raise
            return None

    def status_or_unknown(self, chat_id: str) -> dict[str, Any]:
        """As status(), with `running: None` and `live: "unknown"` when Redis cannot say."""
        try:
            return self.status(chat_id)
        except NumiError as exc:
            if exc.code != "live_unavailable":
                raise
            return {
                "running": None,
                "turn_id": None,
                "last_event_id": None,
                "started_at": None,
                "live": "unknown",
            }

    def running_chat_ids(self, chat_ids) -> set[str]:
        """Which of these chats have a running turn (one Redis round trip for them all)."""
        chat_ids = list(chat_ids)
        running = {chat_id for chat_id in chat_ids if chat_id in self.turns}
        return running | self.table.running(
            [chat_id for chat_id in chat_ids if chat_id not in running]
        )

    def last_event_id(self, chat_id: str) -> int:
        """The chat's newest event id: a client that follows from it misses nothing."""
        return self.table.newest_event_id(chat_id)

    def running_among(self, chat_ids) -> set[str]:
        """Which of `chat_ids` have a running turn: one call for a page of the sidebar.
        For display: when Redis cannot say, only this process's own turns."""
        try:
            return self.running_chat_ids(chat_ids)
        except NumiError as exc:
            if exc.code != "live_unavailable":
                raise
            return {chat_id for chat_id in chat_ids if chat_id in self.turns}

    def get(self, chat_id: str) -> Turn | None:
        return self.turns.get(chat_id)

    def start(self, request: TurnRequest) -> Turn | None:
        """Start a turn for a chat the caller has already checked the user owns.

        Returns None when the chat's running turn is this very request (the same
        request_id, sent twice or to two processes at once): the retried send follows that
        turn, whose `accepted` event carries the saved question, instead of failing. A turn
        of the same request whose process died is not that: it holds the chat until its
        lease lapses but will never answer, so the retry is refused (`turn_running`).
        """
        if self.stopping:
            raise server_stopping()
        running = self.turns.get(request.chat_id)
        if running is not None:
            if request.request_id and running.request.request_id == request.request_id:
                return None
            raise turn_running()
        channel = self.channel(request.chat_id)
        turn = Turn(channel, request, frame_interval=self.frame_interval, start_gate=self.starts)
        try:
            channel.begin_turn(turn.id, request.request_id)
        except NumiError as exc:
            if (
                request.request_id
                and getattr(exc, "request_id", None) == request.request_id
                and self.request_turn(request.chat_id, request.request_id) == "live"
            ):
                return None
            raise
        self.turns[request.chat_id] = turn
        turn.greenlet = gevent.spawn(self._run, turn)
        self.table.turn_started(turn)
        self._changed(turn)
        return turn

    def request_turn(self, chat_id: str, request_id: str) -> str | None:
        """Whether the chat's running turn answers this very request_id: "live" (in this
        process, or with Redis in another that is alive), "dead" (its process died; its
        turn holds the chat until the lease lapses), None (another turn, or none)."""
        running = self.turns.get(chat_id)
        if running is not None:
            return "live" if running.request.request_id == request_id else None
        return self.table.request_turn(chat_id, request_id)

    def _run(self, turn: Turn) -> None:
        try:
            with self.app.app_context():
                self.producer(turn)
        except Exception:
            log.exception("turn %s of chat %s crashed", turn.id, turn.request.chat_id)
            turn.emit(
                "error",
                {
                    "code": "internal_error",
                    "message": "The turn failed on the server. The log has the details.",
                },
            )
        finally:
            if self.turns.get(turn.request.chat_id) is turn:
                self.turns.pop(turn.request.chat_id, None)
            if not self.turns:
                self.heap.turns_ended()
            if turn.lost:
                # The chat is another turn's now (or its sweeper's): nothing follows here.
                return
            after = getattr(turn, "after_end", None)
            # `title_pending`: a `title_update` follows (a stream that ends at turn_end
            # waits for it a little).
            turn.emit("turn_end", {"title_pending": True} if after is not None else {})
            self._changed(turn)
            if after is not None:
                self._follow(gevent.spawn(self._run_after, turn, after, then=self._changed))
            for hook in self.turn_end_hooks:
                self._follow(gevent.spawn(self._run_after, turn, lambda hook=hook: hook(turn)))

    def _follow(self, work: gevent.Greenlet) -> None:
        self.after_work.add(work)
        work.link(self.after_work.discard)

    def stop_all(self, timeout: float) -> None:
        """Cancel every running turn and kill the work that follows ended turns, waiting up
        to `timeout` seconds for each. For an app that ends in a process that goes on (the
        tests' apps): left running, a title request of one test reached the provider that
        the next test was reading. A server process stops with `shutdown`."""
        self.heap.stop()
        gevent.killall(list(self.after_work), timeout=timeout)  # a queued follow-up's start
        for turn in list(self.turns.values()):
            turn.cancel("shutdown")
        deadline = time.monotonic() + timeout
        while self.turns and time.monotonic() < deadline:
            gevent.sleep(0.05)
        gevent.killall(
            [turn.greenlet for turn in self.turns.values() if turn.greenlet], timeout=timeout
        )
        gevent.killall(list(self.after_work), timeout=timeout)

    def shutdown(self, grace: float, save_timeout: float = 10.0) -> None:
        """Stop gracefully: take no new turns, let running ones finish for `grace` seconds,
        then stop the rest as interrupted (each saves what it has; the follow-up queue
        pauses), and with Redis write what is pending and hand back any lease still held.

        A turn whose save waits for the database has nothing left to finish: it is stopped
        at once, and keeps its answer in a recovery file (agent/durable.py) before this
        returns; the process must not exit while that file is being written."""
        self.stopping = True
        deadline = time.monotonic() + grace
        while self.turns and time.monotonic() < deadline:
            self._stop_saves_waiting_for_database()
            gevent.sleep(0.05)
        left = list(self.turns.values())
        for turn in left:
            log.warning("server stopping: saving the answer of chat %s", turn.request.chat_id)
            turn.cancel("shutdown")
        deadline = time.monotonic() + save_timeout
        while self.turns and time.monotonic() < deadline:
            gevent.sleep(0.05)
        self.table.shutdown(max(deadline - time.monotonic(), 1.0))
        for hook in self.stopped_hooks:
            try:
                hook()
            except Exception:
                log.exception("a hook after the turns stopped failed")

    def _stop_saves_waiting_for_database(self) -> None:
        for turn in list(self.turns.values()):
            for waiting in (turn, *turn.lanes.values()):
                if waiting.waiting_for_database and not waiting.cancelled:
                    log.warning("server stopping: the answer of chat %s waits for the "
                                "database; keeping it on disk", turn.request.chat_id)  # fmt: skip
                    waiting.cancel("shutdown")

    def _changed(self, turn: Turn) -> None:
        for hook in self.change_hooks:
            try:
                hook(turn)
            except Exception:
                log.exception("a hook told of chat %s's change failed", turn.request.chat_id)

    def _run_after(
        self,
        turn: Turn,
        action: Callable[[], None],
        then: Callable[[Turn], None] | None = None,
    ) -> None:
        """Work that follows a turn (the title) and publishes on the chat's channel; `then`
        is told of the turn once it has succeeded."""
        try:
            with self.app.app_context():
                action()
            if then is not None:
                then(turn)
        except Exception as exc:
            if is_storage_failure(exc):  # the database is down: one line, not a trace
                log.error("post-turn work for chat %s: storage unavailable: %s",
                          turn.request.chat_id, first_line(exc))  # fmt: skip
                return
            log.exception("post-turn work failed for chat %s", turn.request.chat_id)

    def stop(self, chat_id: str, lane: int | None = None) -> bool:
        """Cancel the chat's running turn (wherever it runs), or with `lane` one lane of a
        compare turn; returns whether one was running."""
        if chat_id in self.turns:
            return self.stop_local(chat_id, lane)
        return self.table.stop(chat_id, lane)

    def stop_local(self, chat_id: str, lane: int | None = None) -> bool:
        turn = self.turns.get(chat_id)
        if turn is None:
            return False
        if lane is not None:
            turn = turn.lanes.get(lane)
            if turn is None:
                return False
        turn.cancel()
        return True

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None = None) -> bool:
        """Answer a waiting approval (wherever its turn runs); False when nothing waits under
        `call_id`. An approval must carry the digest of the call its card showed (a denial
        needs none)."""
        if chat_id not in self.turns:
            return self.table.approve(chat_id, call_id, decision, digest)
        return self.approve_local(chat_id, call_id, decision, digest)

    def approve_local(
        self, chat_id: str, call_id: str, decision: str, digest: str | None = None
    ) -> bool:
        turn = self.turns.get(chat_id)
        if turn is None:
            return False
        result = turn.approvals.get(call_id)
        if result is None or result.ready():
            return False
        expected = turn.approval_digests.get(call_id)
        if decision == "approve" and expected is not None and digest != expected:
            raise NumiError(
                "approval_mismatch",
                "That approval does not match the call shown on its card; nothing was run.",
                409,
            )
        result.set("approve" if decision == "approve" else "deny")
        return True

    def subscribe(
        self, chat_id: str, last_event_id: int | None = None
    ) -> tuple[Subscription, list[dict]]:
        return self.channel(chat_id).subscribe(last_event_id)

    def status(self, chat_id: str) -> dict[str, Any]:
        return self.table.status(chat_id, self.turns.get(chat_id))
