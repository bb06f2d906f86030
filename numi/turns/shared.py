"""The Redis turn table (`SharedTurns`, one `table.TurnTable` backend): live turns shared
by many processes and hosts. Its chat channels are `redis_channel.RedisChannel`s; its Lua
scripts are in `redis_scripts`.

With NUMI_REDIS_URL set, every process (gunicorn worker, `numi serve` on another host)
sees every chat's live turn. Keys, all under NUMI_REDIS_PREFIX (`p`), each in one of
GROUPS hash-tag groups `{g}` (g = crc32(chat id) % GROUPS; see GROUPS):

    p{g}c:<chat>:seq    the chat's last event id (INCR; starts from the clock like the
                        in-process ids, so ids keep increasing across restarts)
    p{g}c:<chat>:events a Stream of the chat's events; entry id "<event_id>-0", field `e`
                        is the event's JSON, made once by its publisher (`p`: the id its
                        writer wrote before, on the first entry after the counter restarted)
    p{g}c:<chat>:turn   hash: turn_id, owner, started_at, running, and the turn folded
                        through event `through` (`state`), for snapshots on any process
    p{g}c:<chat>:lease  "<process>:<turn_id>" while a turn runs: SET NX PX, renewed by the
                        owning process's heartbeat; one turn per chat across all processes
    p{g}running         the group's chats whose turn holds (or held) a lease (sweeper)
    p{g}alive           set by every process at start; missing means Redis lost its data
                        (per group: in a cluster, the node holding the group lost it)
    p{g}recovering      the recovery window after that (one lease period): owners take
                        their leases back, no new turn begins (redis_scripts: fencing)
    p{g}wake:<process>  a one-entry Stream that wakes that process's reader of the group
    p ctl:<process>     pub/sub: stop and approve for the turns that process runs

Every script and every XREAD touches keys of one group only, which is what a Redis Cluster
needs to shard chats across nodes (groups are the unit of sharding).

Hot path, per process: the producer's publish() only appends the encoded event to the
chat's pending list; one writer greenlet sends every chat's pending events in one pipeline
of one Lua call per chat (INCR + XADD per event, trimming, the snapshot now and then), at
most one round per frame interval (NUMI_FRAME_INTERVAL_MS), so under load every chat's
events of one interval share a round trip and a lone event after a quiet spell goes at
once. One reader greenlet per process (`redis_reader.GroupReader`; per group, READERS,
on a cluster) follows the streams of all the chats it streams to with one XREAD BLOCK (on a
monkey-patched socket: it parks only itself) and hands each chat's entries to its channel,
which fans them out to that process's subscribers, whose queues are the in-process
`Subscription`s. The owner's subscribers read through the stream too: one mechanism, one
order, the same ids for everyone.

Snapshots: the owner folds its events into a TurnState as in-process; before trimming
would drop events the stored state does not cover, the state goes into the turn hash in
the same Lua call. Any process computes the snapshot as that state plus the stream after
`through` (one Lua call, so it is consistent).

A process that dies mid-turn stops renewing its lease; every process's sweeper checks the
`running` set SWEEPS_PER_LEASE times per lease period and the first to see a lapsed lease
appends `error` {code: interrupted} and `turn_end` (one atomic script, so exactly once).
A dead owner is so noticed between 2/3 of a lease and a lease plus a sweep interval after
its last sign of life.

A lease is the turn's right to write (fencing, see redis_scripts): a turn whose chat was
taken over, or closed by a sweeper after its lease lapsed (its process stalled past it:
`kill -STOP`, a frozen VM), stops at once, publishing nothing more and saving nothing
(`Turn.lose`); the writer's PUBLISH and the check before each save (`confirm_lease`) find
out, whichever comes first. A lapse nobody acted on yet is taken back.

Redis itself restarting (no persistence: the data is gone): the owner keeps running the
turn in memory. Its writer retries with back-off and keeps the events meanwhile (bounded by
the buffer limits); the first script to run after the restart opens the recovery window,
in which the owner takes its lease back (heartbeat or writer) and stores a fresh snapshot
with its next events, and no other turn may begin in the chat. The counter starts again
above the last id it wrote, and readers on every process reconnect and continue from their
last id. When the backlog outgrew the buffer, what was dropped is replaced by one
`snapshot` event of the turn so far, and a reader that finds a gap in the ids sends its
subscribers a snapshot folded from Redis: connected clients are made whole either way. The
owner's first write after the loss must carry the turn's state (PUBLISH refuses it
otherwise), so no snapshot is made from a state Redis lost.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any

import gevent
import gevent.event

from ..errors import NumiError, live_unavailable
from .channel import TurnState
from .redis_channel import RedisChannel, decode
from .redis_control import RedisControl
from .redis_keys import GROUPS, READERS, chat_group, chat_key
from .redis_leases import RedisLeases
from .redis_owners import request_turn
from .redis_reader import GroupReader
from .redis_scripts import BEGIN, CLOSE_DEAD, FOLD, PUBLISH, RELEASE, RENEW
from .table import TurnHost
from .turn import Turn

log = logging.getLogger(__name__)

# A process holds a connection per reader (XREAD BLOCK), plus the writer's, the
# control listener's and what requests use at once; redis-py 6+ caps a pool at 100 by
# default, which must not cap the number of requests waiting on Redis at once.
MAX_CONNECTIONS = 10_000


class SharedTurns(RedisLeases, RedisControl):
    """The Redis turn table (a `table.TurnTable`), one per process: the Redis client, the
    writer, the control listener, the heartbeat and the sweeper, and this process's view of
    each chat's channel."""

    def __init__(self, manager: TurnHost, config, channel_options: dict[str, int]):
        # lazy: optional extra redis (only a deployment with NUMI_REDIS_URL needs it)
        import redis

        self.redis_module = redis
        self.manager = manager
        self.client = redis.Redis.from_url(
            config["NUMI_REDIS_URL"], health_check_interval=30, max_connections=MAX_CONNECTIONS
        )
        self.prefix = config["NUMI_REDIS_PREFIX"]
        self.lease_ms = max(int(config["NUMI_TURN_LEASE_MS"]), 300)
        self.retention_ms = max(int(config["NUMI_TURN_RETENTION_SECONDS"] * 1000), 1000)
        self.channel_options = channel_options
        # A new id per process (and per fork): leases and control messages name it.
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.control_channel = f"{self.prefix}ctl:{self.process}"
        self.frame_interval = max(int(config.get("NUMI_FRAME_INTERVAL_MS") or 0), 0) / 1000.0
        self.scripts = {
            name: self.client.register_script(text)
            for name, text in (
                ("begin", BEGIN),
                ("publish", PUBLISH),
                ("renew", RENEW),
                ("close_dead", CLOSE_DEAD),
                ("fold", FOLD),
                ("release", RELEASE),
            )
        }
        self.channels: dict[str, RedisChannel] = {}
        self.pending_stops: set[str] = set()  # stops waiting for Redis to come back
        self.dirty: dict[str, RedisChannel] = {}
        self.wake = gevent.event.Event()
        self.last_round = 0.0  # when the writer last sent a round
        self.writing = False  # a round is on its way to Redis
        self.backoff = 0.05  # the writer's wait before it retries a failed round
        self.readers: dict[int, GroupReader] = {}
        self.greenlets: list[gevent.Greenlet] = []
        self.started_pid: int | None = None

    def key(self, chat_id: str, name: str) -> str:
        return chat_key(self.prefix, chat_id, name)

    def group_key(self, group: int, name: str) -> str:
        return f"{self.prefix}{{{group}}}{name}"

    def group_keys(self, chat_id: str) -> list[str]:
        """The chat's group's `running`, `alive` and `recovering` keys (in its slot)."""
        group = chat_group(chat_id)
        return [self.group_key(group, name) for name in ("running", "alive", "recovering")]

    def follow(self, channel: RedisChannel) -> None:
        """Have this process's reader follow the channel from `channel.pos`."""
        group = chat_group(channel.chat_id) % READERS
        reader = self.readers.get(group)
        if reader is None:
            reader = self.readers[group] = GroupReader(self, group)
        reader.follow(channel)

    def ensure_started(self) -> None:
        """Start the background greenlets, once per process (after a fork, in the worker)."""
        if self.started_pid == os.getpid():
            return
        self.started_pid = os.getpid()
        # A worker forked from a master that built the app (gunicorn --preload) is a process
        # of its own: its leases and control channel must not be its siblings'.
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.control_channel = f"{self.prefix}ctl:{self.process}"
        try:
            # Marks this Redis as holding our data; a script that finds it gone knows Redis
            # lost it (redis_scripts: fencing). Unreachable now: the first script sets it.
            pipe = self.client.pipeline(transaction=False)
            for group in range(GROUPS):
                pipe.set(self.group_key(group, "alive"), "1", nx=True)
            pipe.execute()
        except self.redis_module.RedisError as exc:
            log.warning("Redis is unreachable at start (%s)", exc)
        self.greenlets = [
            gevent.spawn(loop) for loop in (self._write, self._listen, self._heartbeat, self._sweep)
        ]

    def close(self) -> None:
        for greenlet in self.greenlets:
            greenlet.kill(block=False)
        self.started_pid = None

    def channel(self, chat_id: str) -> RedisChannel:
        self.ensure_started()
        channel = self.channels.get(chat_id)
        if channel is None:
            channel = self.channels[chat_id] = RedisChannel(self, chat_id, **self.channel_options)
        return channel

    # --- questions any process may ask ------------------------------------------------------

    def _unreachable(self, exc: Exception) -> NumiError:
        log.warning("Redis is unreachable (%s)", exc)
        return live_unavailable()

    def running(self, chat_ids: list[str]) -> set[str]:
        """Which of these chats have a turn running on some process (one MGET); raises
        live_unavailable when Redis cannot say."""
        if not chat_ids:
            return set()
        self.ensure_started()
        try:
            holders = self.client.mget([self.key(chat_id, "lease") for chat_id in chat_ids])
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None
        return {chat_id for chat_id, holder in zip(chat_ids, holders) if holder is not None}

    def status(self, chat_id: str, turn: Turn | None = None) -> dict[str, Any]:
        """As TurnTable.status, from Redis alone (this process's `turn` adds nothing)."""
        self.ensure_started()
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.key(chat_id, "lease"))
        pipe.hmget(self.key(chat_id, "turn"), "turn_id", "started_at")
        pipe.get(self.key(chat_id, "seq"))
        try:
            held, (turn_id, started_at), seq = pipe.execute()
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None
        running = bool(held)
        return {
            "running": running,
            "turn_id": turn_id.decode() if turn_id else None,
            "last_event_id": int(seq or 0),
            "started_at": float(started_at) if running and started_at else None,
        }

    def last_event_id(self, chat_id: str, *, start: bool = False) -> int:
        """The chat's newest event id; with `start`, a chat without one gets its clock-based
        start now, so a client can follow from it before the turn begins."""
        key = self.key(chat_id, "seq")
        if not start:
            return int(self.client.get(key) or 0)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(key, int(time.time() * 1000), nx=True, px=self.retention_ms)
        pipe.get(key)
        return int(pipe.execute()[1])

    def newest_event_id(self, chat_id: str) -> int:
        try:
            return self.last_event_id(chat_id, start=True)
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None

    def turn_started(self, turn: Turn) -> None:
        pass  # the heartbeat renews its lease; the writer ends it with its turn_end

    def request_turn(self, chat_id: str, request_id: str) -> str | None:
        try:
            return request_turn(self, chat_id, request_id)
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None

    def fold(self, chat_id: str, *, wait: bool = False) -> tuple[TurnState | None, int]:
        """The chat's turn folded through its newest event, and that event's id. With
        `wait`, a running turn whose state is missing (Redis lost its data; its owner stores
        it again with its next write) is waited for, up to a lease period."""
        deadline = time.monotonic() + self.lease_ms / 1000.0
        while True:
            through, state_json, entries, seq, running = self.scripts["fold"](
                keys=[
                    self.key(chat_id, "turn"),
                    self.key(chat_id, "events"),
                    self.key(chat_id, "seq"),
                ]
            )
            if through or running != b"1" or not wait or time.monotonic() > deadline:
                break
            gevent.sleep(0.05)
        last = int(seq or 0)
        if not through or not state_json:
            return None, last
        state = TurnState.restore(json.loads(state_json))
        last = int(through)
        for entry_id, fields in entries:
            event = decode(entry_id, dict(zip(fields[::2], fields[1::2])))
            if event["turn_id"] == state.turn_id:
                state.apply(event["type"], event["data"])
            last = event["event_id"]
        return state, last

    def shutdown(self, timeout: float) -> None:
        """Write what is pending (bounded), then hand back the leases still held."""
        if self.started_pid != os.getpid():
            return
        if not self.flush(timeout):
            log.warning("stopping with events not yet written to Redis")
        self.release_leases()

    def flush(self, timeout: float) -> bool:
        """Wait (bounded) until the writer has sent every pending event, and this process's
        clients have been handed what it wrote (read back and taken from their queues, so
        a stopping process's sockets get their turn's end); True when done."""
        deadline = time.monotonic() + timeout
        while (
            self.dirty
            or self.writing
            or any(channel.pending or channel.unsent() for channel in self.channels.values())
        ):
            if time.monotonic() > deadline:
                return False
            gevent.sleep(0.02)
        return True

    # --- writing ------------------------------------------------------------------------------

    def mark_dirty(self, channel: RedisChannel) -> None:
        self.dirty[channel.chat_id] = channel
        self.wake.set()

    def _write(self) -> None:
        """Send every chat's pending events: one pipeline per round, one Lua call per chat."""
        while True:
            self.wake.wait()
            # At most one round per frame interval: under load, every chat's events of one
            # interval share one pipeline (and their readers one XREAD answer); a lone
            # event after a quiet spell goes at once.
            wait = self.last_round + self.frame_interval - time.monotonic()
            if wait > 0:
                gevent.sleep(wait)
            self.wake.clear()
            self.last_round = time.monotonic()
            if not self.dirty:
                continue
            self.writing = True
            try:
                sent = self._round()
            finally:
                self.writing = False
            if self.dirty:  # published meanwhile (or given back): another round
                self.wake.set()
            if sent:
                self.backoff = 0.05
            else:
                gevent.sleep(self.backoff)
                self.backoff = min(self.backoff * 2, 1.0)

    def _round(self) -> bool:
        """One writer round: every dirty chat's batch in one pipeline. False when Redis
        could not be reached (the batches are given back)."""
        channels = list(self.dirty.values())
        self.dirty.clear()
        batches = [(channel, channel.take_batch()) for channel in channels]
        try:
            pipe = self.client.pipeline(transaction=False)
            # EVALSHA itself: a Script call in a pipeline costs a SCRIPT EXISTS round trip
            # per execute; a missing script is loaded below instead.
            sha = self.scripts["publish"].sha
            for channel, batch in batches:
                pipe.evalsha(sha, 7, *channel.publish_keys, *batch.args(self, channel))
            results = pipe.execute(raise_on_error=False)
        except self.redis_module.RedisError as exc:
            log.warning("publishing to Redis failed (%s); retrying", exc)
            for channel, batch in batches:
                channel.give_back(batch)
                self.dirty[channel.chat_id] = channel
            return False
        missing_script = False
        for (channel, batch), result in zip(batches, results):
            if isinstance(result, self.redis_module.exceptions.NoScriptError):
                missing_script = True  # (Redis restarted): nothing was written
                channel.give_back(batch)
                self.dirty[channel.chat_id] = channel
                continue
            if isinstance(result, Exception):
                log.error("publishing events of chat %s failed: %s", channel.chat_id, result)
                continue
            code, first = int(result[0]), int(result[1])
            if code == 0:  # its turn lost the lease: nothing was written
                channel.release(batch.fenced_turn)
                self.lose(channel.chat_id, batch.fenced_turn)
            elif code == 3:  # taken back after Redis lost its data: state first
                channel.give_back(batch)
                self.mark_dirty(channel)
            else:
                channel.written(batch, first)
        if missing_script:
            try:
                self.scripts["publish"].sha = self.client.script_load(PUBLISH)
            except self.redis_module.RedisError as exc:
                log.warning("loading the publish script failed (%s)", exc)
                return False
        return True
