"""This process's view of one chat's channel in Redis (`RedisChannel`, the same interface
as the in-process `ChatChannel`): the producer side queues events for the table's writer
and decides trimming and snapshots (`Batch`); the consumer side replays from the stream and
fans the events its group's reader (`redis_reader.GroupReader`) reads out to the
subscribers.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from typing import Any, Protocol

import gevent

from ..errors import live_unavailable
from .channel import TERMINAL, Event, Subscription, TurnState, event_tail
from .events import check_event_type

log = logging.getLogger(__name__)

TERMINAL_MARK = b'"type":"%s"' % TERMINAL.encode()


class ChannelHost(Protocol):
    """What a RedisChannel uses of its table (shared.SharedTurns)."""

    client: Any
    redis_module: Any
    process: str
    retention_ms: int
    lease_ms: int

    def key(self, chat_id: str, name: str) -> str: ...

    def group_keys(self, chat_id: str) -> list[str]: ...

    def begin(
        self,
        channel: RedisChannel,
        turn_id: str,
        token: str,
        floor: int,
        state_json: str,
        request_id: str | None,
    ) -> int: ...

    def mark_dirty(self, channel: RedisChannel) -> None: ...

    def follow(self, channel: RedisChannel) -> None: ...

    def last_event_id(self, chat_id: str, *, start: bool = False) -> int: ...

    def fold(self, chat_id: str, *, wait: bool = False) -> tuple[TurnState | None, int]: ...

    def confirm_lease(self, channel: RedisChannel, turn_id: str) -> bool: ...


def _id(entry_id: bytes) -> int:
    return int(entry_id.split(b"-", 1)[0])


def decode(entry_id: bytes, fields: dict) -> Event:
    """A stream entry as the event dict subscribers get (its JSON kept for the JSON views)."""
    raw = fields[b"e"]
    event = Event(json.loads(raw))
    event.encoded = raw.decode()
    return event


# What a pending event is to the channel's own turn (the third item of `pending`).
OTHER, OWN, ENDS = 0, 1, 2  # another turn's or none; the owned turn's; its turn_end


class Batch:
    """Events of one chat taken for one Lua call, with the trimming and snapshot decided."""

    __slots__ = (
        "tails",
        "sizes",
        "kinds",
        "maxlen",
        "state",
        "ending_turn",
        "token",
        "fenced_turn",
        "gap",
    )

    def __init__(self, tails, sizes, kinds, maxlen, state, ending_turn, token, fenced_turn, gap):
        self.tails, self.sizes, self.kinds = tails, sizes, kinds
        self.maxlen, self.state = maxlen, state
        self.ending_turn, self.token = ending_turn, token
        # The owned turn whose lease must hold for the batch to be written ("": none).
        self.fenced_turn = fenced_turn
        # The first tail is a `snapshot` standing for owned-turn events that were dropped.
        self.gap = gap

    def args(self, shared: ChannelHost, channel: RedisChannel) -> list:
        floor = max(int(time.time() * 1000), channel.last_written + 1)
        return [
            floor,
            self.maxlen,
            self.state,
            self.ending_turn,
            self.token,
            shared.retention_ms,
            channel.chat_id,
            self.fenced_turn,
            shared.process,
            shared.lease_ms,
            channel.last_written,
            *self.tails,
        ]


class RedisChannel:
    """This process's view of one chat's channel in Redis (same interface as ChatChannel)."""

    def __init__(
        self, shared: ChannelHost, chat_id: str, *, max_events: int, max_bytes: int, queue_size: int
    ):
        self.shared = shared
        self.chat_id = chat_id
        self.key = shared.key(chat_id, "events")
        # The publish script's keys: seq events turn lease running alive recovering.
        self.publish_keys = [
            *(shared.key(chat_id, name) for name in ("seq", "events", "turn", "lease")),
            *shared.group_keys(chat_id),
        ]
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.queue_size = queue_size
        self.subscribers: set[Subscription] = set()
        self.following = False  # this process's reader of the chat's group follows it
        self.pos = 0  # the reader's position: the last event id handed to subscribers
        # The subscribers missed events (a gap in the ids) and no snapshot could stand for
        # them yet: one is sent as soon as the turn's state is back in Redis.
        self.behind = False
        # Producer side (only while this process owns the chat's turn).
        self.pending: list[tuple[str, int, int]] = []  # (tail, size, OTHER/OWN/ENDS)
        self.state: TurnState | None = None
        self.owned_turn: str | None = None
        self.token = ""
        self.sizes: deque[int] = deque()  # sizes of this turn's events still in the stream
        self.bytes = 0
        self.since_snapshot = 0  # events written after the stored state's `through`
        self.force_snapshot = False
        # The owned turn's events were dropped (a backlog bigger than the buffer, kept while
        # Redis was unreachable): the next batch stands for them with one `snapshot` event
        # of the turn so far, and until it is written the turn's events are not kept.
        self.gap = False
        self.last_written = 0

    def unsent(self) -> bool:
        """Whether this process wrote events its own subscribers have not taken yet (read
        back from the stream, then from their queues)."""
        if not self.subscribers or not self.following:
            return False
        return self.pos < self.last_written or any(
            not subscription.queue.empty() for subscription in self.subscribers
        )

    def idle(self) -> bool:
        return (
            not self.subscribers
            and not self.following
            and not self.pending
            and self.owned_turn is None
        )

    # --- producer side --------------------------------------------------------------------

    def begin_turn(self, turn_id: str, request_id: str | None = None) -> None:
        """Take the chat's lease (TurnManager has checked this process runs none)."""
        state = TurnState(turn_id=turn_id)
        token = f"{self.shared.process}:{turn_id}"
        floor = max(int(time.time() * 1000), self.last_written + 1)
        self.shared.begin(
            self, turn_id, token, floor, json.dumps({**state.snapshot(), "error": None}), request_id
        )
        self.state, self.owned_turn, self.token = state, turn_id, token
        self.sizes.clear()
        self.bytes = self.since_snapshot = 0

    def publish(self, turn_id: str | None, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Queue the event for the writer; its id is given in Redis (ids are shared)."""
        check_event_type(type_)
        kind = OTHER
        if self.state is not None and turn_id == self.state.turn_id:
            self.state.apply(type_, data)
            if turn_id == self.owned_turn:
                kind = ENDS if type_ == TERMINAL else OWN
                if self.gap and kind == OWN:
                    # The snapshot that stands for the dropped events will fold this one too.
                    self.shared.mark_dirty(self)
                    return {"event_id": None, "turn_id": turn_id, "type": type_, "data": data}
        tail = event_tail(turn_id, type_, data)
        self.pending.append((tail, len(tail) + 24, kind))
        self.shared.mark_dirty(self)
        return {"event_id": None, "turn_id": turn_id, "type": type_, "data": data}

    def take_batch(self) -> Batch:
        """Everything pending, with the trim it allows and, when the trim would drop events
        the stored state does not cover, the state to store (all without yielding, so the
        state stands exactly for the events up to the batch's last)."""
        items, self.pending = self.pending, []
        fenced = self.owned_turn or ""
        gap = False
        if self.owned_turn is not None and self.state is not None:
            if not self.gap and (
                len(items) > self.max_events or sum(size for _, size, _ in items) > self.max_bytes
            ):
                # A backlog the stream cannot hold (kept while Redis was unreachable):
                # written whole, it would be trimmed in the same call, and clients that
                # follow the stream would silently miss what was trimmed.
                self.gap = True
            if self.gap:
                # The state folds every event published, dropped ones included: one
                # snapshot event makes a client that follows the stream whole; the turn's
                # end and other turns' events (not in the state) stay after it.
                self.gap, gap = False, True
                tail = event_tail(self.state.turn_id, "snapshot", self.state.snapshot())
                items = [(tail, len(tail) + 24, OTHER), *(i for i in items if i[2] != OWN)]
                self.force_snapshot = True
        tails = [tail for tail, _, _ in items]
        sizes = [size for _, size, _ in items]
        kinds = [kind for _, _, kind in items]
        ending = ENDS in kinds
        maxlen, state = 0, ""
        if self.owned_turn is not None and self.state is not None:
            count, total = len(self.sizes) + len(sizes), self.bytes + sum(sizes)
            keep = count
            dropped = iter(list(self.sizes) + sizes)
            while keep > 1 and (keep > self.max_events or total > self.max_bytes):
                total -= next(dropped)
                keep -= 1
            if keep < count:
                maxlen = keep
                if self.since_snapshot + len(sizes) > keep:
                    state = self._state_json()
            if self.force_snapshot:
                state = self._state_json()
                self.force_snapshot = False
        token = self.token
        if ending:
            self.owned_turn = None
        return Batch(
            tails,
            sizes,
            kinds,
            maxlen,
            state,
            self.state.turn_id if ending and self.state else "",
            token,
            fenced,
            gap,
        )

    def _state_json(self) -> str:
        assert self.state is not None  # only an owned turn's batches carry its state
        return json.dumps({**self.state.snapshot(), "error": self.state.error}, ensure_ascii=False)

    def give_back(self, batch: Batch) -> None:
        """A batch Redis did not take: first in line again (bounded like the buffer). Redis
        may come back without its data, so the next batch stores the turn's state; when the
        backlog outgrows the buffer, the owned turn's events give way to a snapshot."""
        if batch.ending_turn:
            self.owned_turn = batch.ending_turn
        items = list(zip(batch.tails, batch.sizes, batch.kinds))
        if batch.gap:
            # Its snapshot is made again, fresh, for the next batch.
            del items[0]
            self.gap = True
        self.pending = items + self.pending
        if self.owned_turn is not None and self.state is not None:
            self.force_snapshot = True
            if self.gap or (
                len(self.pending) > self.max_events
                or sum(size for _, size, _ in self.pending) > self.max_bytes
            ):
                self.pending = [item for item in self.pending if item[2] != OWN]
                self.gap = True
        elif len(self.pending) > self.max_events:
            del self.pending[: len(self.pending) - self.max_events]

    def release(self, turn_id: str) -> None:
        """The turn lost its lease: forget it here, with whatever it had not yet written."""
        if self.owned_turn == turn_id or (self.state is not None and self.state.turn_id == turn_id):
            self.owned_turn = None
            self.state = None
            self.gap = self.force_snapshot = False
        mark = f',"turn_id":"{turn_id}"'
        self.pending = [item for item in self.pending if not item[0].startswith(mark)]

    def confirm_lease(self, turn_id: str) -> bool:
        """Whether the turn may still save: it holds the chat's lease (checked in Redis)."""
        return self.owned_turn == turn_id and self.shared.confirm_lease(self, turn_id)

    def written(self, batch: Batch, first_id: int) -> None:
        if batch.tails:
            self.last_written = first_id + len(batch.tails) - 1
        if batch.ending_turn:
            if self.state is not None and self.state.turn_id == batch.ending_turn:
                self.state = None
            return
        if self.state is None:
            return
        self.sizes.extend(batch.sizes)
        self.bytes += sum(batch.sizes)
        self.since_snapshot = 0 if batch.state else self.since_snapshot + len(batch.sizes)
        if batch.maxlen:
            while len(self.sizes) > batch.maxlen:
                self.bytes -= self.sizes.popleft()

    # --- consumer side --------------------------------------------------------------------

    @property
    def last_event_id(self) -> int:
        return self.shared.last_event_id(self.chat_id)

    def subscribe(
        self, last_event_id: int | None = None
    ) -> tuple[Subscription, list[dict[str, Any]]]:
        """As ChatChannel.subscribe: exact replay from the stream when it still holds every
        event after `last_event_id`, else a snapshot; then live events from the reader.
        Raises live_unavailable when Redis fails while the backlog is read (nothing is
        subscribed then: the caller tells its client and tries again)."""
        subscription = Subscription(self, self.queue_size)
        self.subscribers.add(subscription)
        try:
            self._follow()
            backlog = self._backlog(subscription, last_event_id)
        except self.shared.redis_module.RedisError as exc:
            subscription.close()
            log.warning("reading chat %s's backlog from Redis failed (%s)", self.chat_id, exc)
            raise live_unavailable() from None
        except BaseException:
            subscription.close()
            raise
        return subscription, backlog

    def _backlog(
        self, subscription: Subscription, last_event_id: int | None
    ) -> list[dict[str, Any]]:
        if last_event_id is not None:
            # One MULTI: the stream after the client's id and the newest id, at one instant
            # (read apart, events published in between would look like a gap).
            pipe = self.shared.client.pipeline(transaction=True)
            pipe.xrange(self.key, f"({last_event_id}-0", "+", count=self.max_events + 16)
            pipe.get(self.shared.key(self.chat_id, "seq"))
            entries, seq = pipe.execute()
            if entries and _id(entries[0][0]) == last_event_id + 1:
                backlog: list[dict[str, Any]] = [
                    decode(entry_id, fields) for entry_id, fields in entries
                ]
                subscription.skip_through = backlog[-1]["event_id"]
                return backlog
            if not entries and last_event_id == int(seq or 0):
                subscription.skip_through = last_event_id
                return []
            # An id above the chat's counter was given before Redis lost its data (or by
            # another deployment): what it stands for is unknown here, so the client gets
            # the turn so far and every event after the counter (the turn's end too).
        snapshot = self.snapshot_event()
        subscription.skip_through = snapshot["event_id"] or 0
        return [snapshot] if snapshot["turn_id"] is not None else []

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscribers.discard(subscription)

    def snapshot_event(self, *, wait: bool = True) -> dict[str, Any]:
        state, last = self.shared.fold(self.chat_id, wait=wait)
        return {
            "event_id": last,
            "turn_id": state.turn_id if state else None,
            "type": "snapshot",
            "data": state.snapshot() if state else {},
        }

    def fan_out(self, entries: list) -> None:
        """Hand the stream entries read after `pos` to this process's subscribers. Ids are
        consecutive; a gap means subscribers missed events: the stream was trimmed past a
        reader that fell behind, or Redis lost its data and the counter started again. A
        `snapshot` right after the gap (the owner's, for a backlog it could not keep) stands
        for what is missing; otherwise a snapshot of the turn so far is sent in place of
        the events up to its id (their turn's end too, so followers know it ended). Nothing
        is missing silently."""
        tried = False  # one snapshot attempt per read
        caught_up = False
        for entry_id, fields in entries:
            event_id = _id(entry_id)
            if event_id <= self.pos:
                # The snapshot stands for it; a turn's end is still told (ends are idempotent).
                if caught_up and TERMINAL_MARK in fields[b"e"]:
                    self._deliver(decode(entry_id, fields))
                continue
            event = decode(entry_id, fields)
            if (
                self.pos
                and event_id != self.pos + 1
                and event["type"] != "turn_start"  # (a new turn leaves nothing of it behind)
                and fields.get(b"p") != b"%d" % self.pos  # (a restarted counter, nothing lost)
            ):
                self.behind = True
            if self.behind and event["type"] == "snapshot":
                self.behind = False
            if self.behind and not tried:
                tried = True
                caught_up = self._catch_up()
                if caught_up and event_id <= self.pos:
                    if event["type"] == TERMINAL:
                        self._deliver(event)
                    continue
            self.pos = event_id
            self._deliver(event)

    def _deliver(self, event: dict[str, Any]) -> None:
        for subscriber in tuple(self.subscribers):
            subscriber.deliver(event)

    def _catch_up(self) -> bool:
        """Send subscribers a snapshot of the chat's turn; False when Redis has no state to
        make it from yet (it lost its data and the owner has not stored it again)."""
        try:
            snapshot = self.snapshot_event(wait=False)
        except self.shared.redis_module.RedisError as exc:
            log.warning("resyncing chat %s failed (%s)", self.chat_id, exc)
            return False
        if snapshot["turn_id"] is None:
            return False
        self.behind = False
        self.pos = max(self.pos, snapshot["event_id"])
        log.info("chat %s: events were missed; subscribers resync by snapshot", self.chat_id)
        self._deliver(snapshot)
        return True

    def _follow(self) -> None:
        """Have this process's reader of the chat's group follow the chat from its newest
        id (read before the subscriber's backlog, so nothing falls between the two). With
        Redis unreachable this waits for it, as a reconnecting client does."""
        if self.following:
            return
        while True:
            try:
                pos = self.shared.last_event_id(self.chat_id)
                break
            except self.shared.redis_module.RedisError as exc:
                log.warning("reading chat %s from Redis failed (%s)", self.chat_id, exc)
                gevent.sleep(0.5)
        if self.following:  # another subscriber started it meanwhile
            return
        self.pos, self.behind, self.following = pos, False, True
        self.shared.follow(self)
