"""The turn table: where the TurnManager finds each chat's channel and the turns it does
not run itself. One interface (`TurnTable`), two backends:

- `LocalTurns` (the default): channels in this process's memory; no other process
  exists, so nothing runs elsewhere and stop/approve never travel;
- `shared.SharedTurns` (NUMI_REDIS_URL): channels in Redis, a lease per running turn,
  stop and approve sent to the owning process.

The manager keeps this process's own running turns (`TurnManager.turns`) and asks the
table only about the rest, so neither backend needs an `if` in the manager.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import gevent

from .channel import Channel, ChatChannel
from .turn import Turn


class TurnTable(Protocol):
    """What the TurnManager asks of a backend. `turn` arguments are this process's own
    running turn of the chat, or None."""

    def channel(self, chat_id: str) -> Channel:
        """The chat's channel (a `ChatChannel` or a `RedisChannel`: one interface)."""

    def running(self, chat_ids: list[str]) -> set[str]:
        """Which of these chats have a turn running beyond this process's own turns."""

    def newest_event_id(self, chat_id: str) -> int:
        """The chat's newest event id, fixed now: a client that follows from it misses nothing."""

    def status(self, chat_id: str, turn: Turn | None) -> dict[str, Any]:
        """`{running, turn_id, last_event_id, started_at}` of the chat's turn, wherever it runs."""

    def stop(self, chat_id: str, lane: int | None = None) -> bool:
        """Cancel a turn (or one lane of it) that runs in another process; False when
        there is none."""

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None) -> bool:
        """Answer an approval of a turn that runs in another process; False when none waits."""

    def request_turn(self, chat_id: str, request_id: str) -> str | None:
        """Whether the chat's turn running in another process answers this request_id:
        "live", "dead" (its process is gone: the turn holds the chat until its lease
        lapses, but will never answer), or None (no such turn)."""

    def turn_started(self, turn: Turn) -> None:
        """Called after this process started `turn`."""

    def shutdown(self, timeout: float) -> None:
        """The process is stopping and its turns have ended (or will not): make what they
        published durable within `timeout` and let other processes take their chats."""


class TurnHost(Protocol):
    """What a table asks of the manager it serves (the Redis one: to renew the leases of
    this process's turns and to apply the stop and approve other processes send)."""

    turns: dict[str, Turn]

    def stop_local(self, chat_id: str, lane: int | None = None) -> bool: ...

    def approve_local(
        self, chat_id: str, call_id: str, decision: str, digest: str | None = None
    ) -> bool: ...


class LocalTurns:
    """The in-process table: one `ChatChannel` per chat in memory, dropped by a reaper
    greenlet once a finished turn's late reconnects are no longer likely."""

    def __init__(self, *, retention: float, channel_options: dict[str, int]):
        self.retention = retention
        self.channel_options = channel_options
        self.channels: dict[str, ChatChannel] = {}
        self._reaper: gevent.Greenlet | None = None

    def channel(self, chat_id: str) -> ChatChannel:
        channel = self.channels.get(chat_id)
        if channel is None:
            channel = self.channels[chat_id] = ChatChannel(chat_id, **self.channel_options)
        return channel

    def running(self, chat_ids: list[str]) -> set[str]:
        return set()  # one process: the manager's own turns are all there are

    def newest_event_id(self, chat_id: str) -> int:
        return self.channel(chat_id).last_event_id

    def status(self, chat_id: str, turn: Turn | None) -> dict[str, Any]:
        channel = self.channels.get(chat_id)
        return {
            "running": turn is not None,
            "turn_id": turn.id
            if turn
            else (channel.state.turn_id if channel and channel.state else None),
            "last_event_id": channel.last_event_id if channel else 0,
            "started_at": turn.started_at if turn else None,
        }

    def stop(self, chat_id: str, lane: int | None = None) -> bool:
        return False

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None) -> bool:
        return False

    def shutdown(self, timeout: float) -> None:
        pass  # nothing outlives this process

    def request_turn(self, chat_id: str, request_id: str) -> str | None:
        return None  # no other process

    def turn_started(self, turn: Turn) -> None:
        if self._reaper is None or self._reaper.dead:
            self._reaper = gevent.spawn(self._reap)

    def _reap(self) -> None:
        """Drop idle channels of finished turns once late reconnects are no longer likely."""
        while self.channels:
            gevent.sleep(min(self.retention, 30) or 1)
            now = time.monotonic()
            for chat_id, channel in list(self.channels.items()):
                expired = (
                    channel.finished_at is not None and now - channel.finished_at > self.retention
                )
                if (
                    not channel.running
                    and not channel.subscribers
                    and (expired or channel.state is None)
                ):
                    self.channels.pop(chat_id, None)
