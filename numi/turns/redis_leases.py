"""A turn's lease: one turn per chat across every process, renewed by its owner's heartbeat
and fenced (see `shared` and `redis_scripts`); the sweeper closes the turns of processes that
died. A part of the Redis turn table (`shared.SharedTurns`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

import gevent

from ..errors import live_unavailable, turn_running
from .redis_channel import RedisChannel
from .redis_keys import GROUPS
from .redis_scripts import INTERRUPTED
from .table import TurnHost
from .turn import Turn

log = logging.getLogger(__name__)


def _channel(turn: Turn) -> RedisChannel:
    """A turn's channel on this backend: always a RedisChannel."""
    return cast(RedisChannel, turn.channel)


# How often per lease period every process sweeps for lapsed leases: a dead owner is closed
# at most a lease plus lease/SWEEPS_PER_LEASE after its last renewal.
SWEEPS_PER_LEASE = 6


class RedisLeases:
    """Begin (take the lease), renew, confirm, lose and hand back leases; sweep dead turns."""

    # Set by SharedTurns.__init__ (this class is one part of it).
    redis_module: Any
    client: Any
    manager: TurnHost
    prefix: str
    lease_ms: int
    scripts: dict[str, Any]
    process: str
    retention_ms: int
    channels: dict[str, RedisChannel]

    # SharedTurns's own (the table and the writer):
    ensure_started: Callable[[], None]
    key: Callable[[str, str], str]
    group_key: Callable[[int, str], str]
    group_keys: Callable[[str], list[str]]
    running: Callable[[list[str]], set[str]]
    mark_dirty: Callable[[RedisChannel], None]

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
        _channel(turn).release(turn_id)
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
                    args=[_channel(turn).token],
                    client=pipe,
                )
            pipe.execute(raise_on_error=False)
        except self.redis_module.RedisError as exc:
            log.warning("handing back leases failed (%s); they lapse instead", exc)

    def _heartbeat(self) -> None:
        """Renew the leases of this process's running turns; stop a turn whose lease was
        taken over or lapsed (it was declared dead while this process stalled)."""
        while True:
            gevent.sleep(self.lease_ms / 3000.0)
            turns = [turn for turn in self.manager.turns.values() if _channel(turn).owned_turn]
            if not turns:
                continue
            try:
                pipe = self.client.pipeline(transaction=False)
                for turn in turns:
                    self._renew(turn.id, turn.request.chat_id, _channel(turn).token, client=pipe)
                results = pipe.execute(raise_on_error=False)
            except self.redis_module.RedisError as exc:
                log.warning("lease renewal failed (%s)", exc)
                continue
            for turn, result in zip(turns, results):
                if result == 0:
                    self.lose(turn.request.chat_id, turn.id)
                elif result == 2:  # Redis lost its data: store the turn's state again
                    _channel(turn).force_snapshot = True
                    self.mark_dirty(_channel(turn))

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
