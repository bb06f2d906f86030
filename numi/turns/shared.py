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
import zlib
from typing import Any

import gevent
import gevent.event

from ..errors import NumiError, live_unavailable, turn_running
from .channel import TurnState
from .redis_channel import RedisChannel, decode
from .redis_reader import GroupReader
from .redis_scripts import BEGIN, CLOSE_DEAD, FOLD, INTERRUPTED, PUBLISH, RELEASE, RENEW
from .table import TurnHost
from .turn import Turn

log = logging.getLogger(__name__)

# A process holds a connection per reader (XREAD BLOCK), plus the writer's, the
# control listener's and what requests use at once; redis-py 6+ caps a pool at 100 by
# default, which must not cap the number of requests waiting on Redis at once.
MAX_CONNECTIONS = 10_000

# How often per lease period every process sweeps for lapsed leases: a dead owner is closed
# at most a lease plus lease/SWEEPS_PER_LEASE after its last renewal.
SWEEPS_PER_LEASE = 6

# Chats are spread over this many groups, each a Redis Cluster hash tag (`{n}`): every key
# a script or an XREAD touches is in one group, so a cluster can shard the groups across
# its nodes, and one XREAD per group and process follows all its chats. 16 groups let up
# to 16 masters share the load; more would cost each process more readers.
GROUPS = 16


# One Redis server takes an XREAD over keys of every group, so a process reads all its
# chats with one; a Redis Cluster refuses keys of several slots in one command, and would
# need one reader per group (READERS = GROUPS).
READERS = 1


def chat_group(chat_id: str) -> int:
    return zlib.crc32(chat_id.encode()) % GROUPS


def chat_key(prefix: str, chat_id: str, name: str) -> str:
    """A chat's key (`name`: seq, events, turn, lease), tagged with the chat's group."""
    return f"{prefix}{{{chat_group(chat_id)}}}c:{chat_id}:{name}"


# How long a Stop asked for while Redis is down waits for it to come back.
STOP_PENDING_SECONDS = 300


class SharedTurns:
    """The Redis turn table (a `table.TurnTable`), one per process: the Redis client, the
    writer, the control listener, the heartbeat and the sweeper, and this process's view of
    each chat's channel."""

    def __init__(self, manager: TurnHost, config, channel_options: dict[str, int]):
        import redis  # an optional dependency: only a deployment with NUMI_REDIS_URL needs it

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

    # --- control: stop and approve reach the owning process ----------------------------------

    def _owner(self, chat_id: str) -> str | None:
        holder = self.client.get(self.key(chat_id, "lease"))
        return holder.decode().rsplit(":", 1)[0] if holder else None

    def _send_control(self, owner: str, message: dict[str, Any]) -> bool:
        return self.client.publish(f"{self.prefix}ctl:{owner}", json.dumps(message)) > 0

    def stop(self, chat_id: str, lane: int | None = None) -> bool:
        """Send Stop to the process that runs the chat's turn (with `lane`, for one lane of
        a compare turn). With Redis unreachable the stop of a whole turn is kept and sent
        once Redis is back (raising stop_pending to say so); a lane's is refused."""
        message: dict[str, Any] = {"op": "stop", "chat_id": chat_id}
        if lane is not None:
            message["lane"] = lane
        try:
            owner = self._owner(chat_id)
            return owner is not None and self._send_control(owner, message)
        except self.redis_module.RedisError as exc:
            if lane is not None:
                raise self._unreachable(exc) from None
            log.warning("stop of chat %s waits for Redis (%s)", chat_id, exc)
        if chat_id not in self.pending_stops:
            self.pending_stops.add(chat_id)
            gevent.spawn(self._stop_when_back, chat_id)
        raise NumiError(
            "stop_pending",
            "The server cannot reach Redis, so Stop cannot reach the answer yet; "
            "it goes through as soon as Redis is back.",
            503,
        )

    def _stop_when_back(self, chat_id: str) -> None:
        """Deliver a stop asked for while Redis was down. Once Redis answers, the owner may
        need up to a lease period to take its lease back (the recovery window)."""
        given_up = time.monotonic() + STOP_PENDING_SECONDS
        back_at = None
        try:
            while time.monotonic() < given_up:
                gevent.sleep(0.25)
                try:
                    owner = self._owner(chat_id)
                    # (Sent only once the owner listens again: its control channel
                    # reconnects after the outage too.)
                    if owner is not None and self._send_control(
                        owner, {"op": "stop", "chat_id": chat_id}
                    ):
                        log.warning("stop of chat %s sent now that Redis is back", chat_id)
                        return
                except self.redis_module.RedisError:
                    back_at = None
                    continue
                if chat_id in self.manager.turns:  # this process runs it after all
                    self.manager.stop_local(chat_id)
                    return
                if owner is not None:
                    continue
                back_at = back_at or time.monotonic()
                if time.monotonic() - back_at > 2 * self.lease_ms / 1000.0:
                    return  # nothing runs there any more
        finally:
            self.pending_stops.discard(chat_id)

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None) -> bool:
        try:
            owner = self._owner(chat_id)
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None
        if owner is None:
            return False
        state, _ = self.fold(chat_id)
        pending = state.pending_approvals.get(call_id) if state is not None else None
        if pending is None:
            return False
        # Checked here too, so the client gets the error; the owner checks again.
        expected = pending.get("digest")
        if decision == "approve" and expected is not None and digest != expected:
            raise NumiError(
                "approval_mismatch",
                "That approval does not match the call shown on its card; nothing was run.",
                409,
            )
        return self._send_control(
            owner,
            {
                "op": "approve",
                "chat_id": chat_id,
                "call_id": call_id,
                "decision": decision,
                "digest": digest,
            },
        )

    def _listen(self) -> None:
        """Apply stop and approve messages other processes send for this process's turns."""
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.control_channel)
                for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    try:
                        self._apply_control(json.loads(message["data"]))
                    except Exception:
                        log.exception("bad control message")
            except self.redis_module.RedisError as exc:
                log.warning("control channel lost (%s); reconnecting", exc)
                gevent.sleep(0.5)
            finally:
                try:
                    pubsub.close()
                except Exception:
                    pass

    def _apply_control(self, message: dict[str, Any]) -> None:
        chat_id = message.get("chat_id")
        if message.get("op") == "stop":
            self.manager.stop_local(chat_id, message.get("lane"))
        elif message.get("op") == "approve":
            self.manager.approve_local(
                chat_id, message.get("call_id"), message.get("decision"), message.get("digest")
            )

    # --- leases --------------------------------------------------------------------------

    def begin(
        self,
        channel: RedisChannel,
        turn_id: str,
        token: str,
        floor: int,
        state_json: str,
        request_id: str | None,
    ) -> int:
        """Take the chat's lease, or raise turn_running (with the running turn's request_id)."""
        self.ensure_started()
        chat_id = channel.chat_id
        # Right after Redis lost its data, the running turns' owners take their leases back
        # within one lease period; a new turn waits that out rather than run beside one.
        deadline = time.monotonic() + 2 * self.lease_ms / 1000.0
        while True:
            try:
                result = self.scripts["begin"](
                    keys=[
                        self.key(chat_id, "lease"),
                        self.key(chat_id, "turn"),
                        self.key(chat_id, "seq"),
                        self.key(chat_id, "events"),
                        *self.group_keys(chat_id),
                    ],
                    args=[
                        token,
                        self.lease_ms,
                        turn_id,
                        self.process,
                        time.time(),
                        floor,
                        state_json,
                        chat_id,
                        request_id or "",
                    ],
                )
            except self.redis_module.RedisError as exc:
                # Without the lease no turn may start (another process might run one);
                # nothing was saved yet, so the client can simply send again.
                log.warning("starting a turn failed: Redis is unreachable (%s)", exc)
                raise live_unavailable() from None
            if result[0] != -2:
                break
            if time.monotonic() > deadline:
                raise live_unavailable()
            gevent.sleep(max(int(result[1] or 0), 50) / 1000.0)
        if result[0] < 0:
            error = turn_running()
            error.request_id = result[1].decode() if len(result) > 1 and result[1] else None
            raise error
        return result[0]

    def _renew(self, turn_id: str, chat_id: str, token: str, client=None):
        return self.scripts["renew"](
            keys=[
                self.key(chat_id, "lease"),
                self.key(chat_id, "turn"),
                *self.group_keys(chat_id),
            ],
            args=[token, self.lease_ms, turn_id, self.process, chat_id],
            client=client,
        )

    def confirm_lease(self, channel: RedisChannel, turn_id: str) -> bool:
        """Whether the turn still holds its lease (renewing it): False means the chat was
        taken over or the turn closed, and it must neither save nor publish again. With Redis
        unreachable nobody can take it over (no turn begins without Redis): True."""
        try:
            result = self._renew(turn_id, channel.chat_id, channel.token)
        except self.redis_module.RedisError as exc:
            log.warning("confirming a lease failed: Redis is unreachable (%s)", exc)
            return True
        if result == 2:  # taken back after Redis lost its data: store the state again
            channel.force_snapshot = True
            self.mark_dirty(channel)
        return result != 0

    def lose(self, chat_id: str, turn_id: str) -> None:
        """The chat's turn `turn_id` lost its lease: stop it here at once (no more events,
        no more saves); the process that holds the chat now (or the sweeper) closes it."""
        turn = self.manager.turns.get(chat_id)
        if turn is None or turn.id != turn_id or turn.lost:
            return
        log.warning("turn %s of chat %s lost its lease; stopping it", turn_id, chat_id)
        if self.manager.turns.get(chat_id) is turn:
            self.manager.turns.pop(chat_id, None)
        turn.channel.release(turn_id)
        turn.lose()

    def release_leases(self) -> None:
        """Hand back the leases of this process's turns (a clean stop): the sweepers of the
        other processes close those turns at once instead of after the lease."""
        turns = list(self.manager.turns.values())
        if not turns:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for turn in turns:
                self.scripts["release"](
                    keys=[self.key(turn.request.chat_id, "lease")],
                    args=[turn.channel.token],
                    client=pipe,
                )
            pipe.execute(raise_on_error=False)
        except self.redis_module.RedisError as exc:
            log.warning("handing back leases failed (%s); they lapse instead", exc)

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

    def _heartbeat(self) -> None:
        """Renew the leases of this process's running turns; stop a turn whose lease was
        taken over or lapsed (it was declared dead while this process stalled)."""
        while True:
            gevent.sleep(self.lease_ms / 3000.0)
            turns = [turn for turn in self.manager.turns.values() if turn.channel.owned_turn]
            if not turns:
                continue
            try:
                pipe = self.client.pipeline(transaction=False)
                for turn in turns:
                    self._renew(turn.id, turn.request.chat_id, turn.channel.token, client=pipe)
                results = pipe.execute(raise_on_error=False)
            except self.redis_module.RedisError as exc:
                log.warning("lease renewal failed (%s)", exc)
                continue
            for turn, result in zip(turns, results):
                if result == 0:
                    self.lose(turn.request.chat_id, turn.id)
                elif result == 2:  # Redis lost its data: store the turn's state again
                    turn.channel.force_snapshot = True
                    self.mark_dirty(turn.channel)

    def _sweep(self) -> None:
        """Close turns whose process died (its lease lapsed); drop idle channel views."""
        while True:
            gevent.sleep(self.lease_ms / 1000.0 / SWEEPS_PER_LEASE)
            try:
                self._close_dead()
            except self.redis_module.RedisError as exc:
                log.warning("sweeping dead turns failed (%s)", exc)
            except Exception:
                log.exception("sweeping dead turns failed")
            for chat_id, channel in list(self.channels.items()):
                if channel.idle():
                    self.channels.pop(chat_id, None)

    def _close_dead(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        for group in range(GROUPS):
            pipe.smembers(self.group_key(group, "running"))
        chat_ids = [member.decode() for members in pipe.execute() for member in members]
        if not chat_ids:
            return
        lapsed = [chat_id for chat_id in chat_ids if chat_id not in self.running(chat_ids)]
        floor = int(time.time() * 1000)
        for chat_id in lapsed:
            closed = self.scripts["close_dead"](
                keys=[
                    self.key(chat_id, "lease"),
                    self.key(chat_id, "turn"),
                    self.key(chat_id, "seq"),
                    self.key(chat_id, "events"),
                    self.group_keys(chat_id)[0],
                ],
                args=[floor, self.retention_ms, chat_id, INTERRUPTED],
            )
            if closed:
                log.warning(
                    "closed the turn of chat %s: its process stopped renewing the lease", chat_id
                )

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
