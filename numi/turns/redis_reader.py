"""One reader per process and chat group (`GroupReader`): a single `XREAD BLOCK` follows the
streams of every chat of the group this process streams to, and hands each chat's entries
to its `RedisChannel`, which fans them out to its subscribers.

A chat that starts being followed while the read is blocked wakes it: the reader's own
wake stream (one entry, in the group's slot like the chats) is part of every read.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import gevent

if TYPE_CHECKING:
    from .redis_channel import RedisChannel

log = logging.getLogger(__name__)

READ_BLOCK_MS = 2000  # a chat with no subscribers left is dropped within this time
READ_COUNT = 1000  # entries per chat and read
WAKE_TTL_MS = 3_600_000  # a dead process's wake stream goes after an hour


class GroupReader:
    def __init__(self, shared, group: int):
        self.shared = shared
        self.wake_key = shared.group_key(group, f"wake:{shared.process}")
        self.wake_pos = b"0-0"
        self.channels: dict[bytes, RedisChannel] = {}  # stream key -> channel
        self.greenlet: gevent.Greenlet | None = None
        self.reading = False  # inside XREAD: a new chat must wake it
        self.pause = min(shared.frame_interval / 8, 0.005)

    def follow(self, channel: RedisChannel) -> None:
        """Follow the channel from its `pos` (its subscribers are already there)."""
        self.channels[channel.key.encode()] = channel
        if self.greenlet is None:
            self.greenlet = gevent.spawn(self._run)
        elif self.reading:
            try:
                pipe = self.shared.client.pipeline(transaction=False)
                pipe.xadd(self.wake_key, {"w": "1"}, maxlen=1, approximate=False)
                pipe.pexpire(self.wake_key, WAKE_TTL_MS)
                pipe.execute()
            except self.shared.redis_module.RedisError as exc:
                # The read fails too and starts again with every chat.
                log.warning("waking the reader failed (%s)", exc)

    def _run(self) -> None:
        client = self.shared.client
        errors = self.shared.redis_module.RedisError
        wake_key = self.wake_key.encode()
        try:
            while True:
                for key, channel in list(self.channels.items()):
                    if not channel.subscribers:
                        del self.channels[key]
                        channel.following = False
                if not self.channels:
                    return
                streams = {key: b"%d-0" % channel.pos for key, channel in self.channels.items()}
                streams[wake_key] = self.wake_pos
                self.reading = True
                try:
                    response = client.xread(streams, count=READ_COUNT, block=READ_BLOCK_MS)
                except errors as exc:
                    log.warning("reading chats from Redis failed (%s); retrying", exc)
                    gevent.sleep(0.5)
                    continue
                finally:
                    self.reading = False
                if response and self.pause:
                    # The rest of the writers' round (one pipeline of many chats) comes in
                    # the next moment: wait for it, so one read takes the whole round.
                    gevent.sleep(self.pause)
                for key, entries in response or ():
                    if key == wake_key:
                        self.wake_pos = entries[-1][0]
                        continue
                    followed = self.channels.get(key)
                    if followed is None:
                        continue
                    try:
                        followed.fan_out(entries)
                    except errors:
                        raise
                    except Exception:  # one chat's bad entry must not stop the others
                        log.exception("reading chat %s failed", followed.chat_id)
                        channel.pos = int(entries[-1][0].split(b"-", 1)[0])
        finally:
            self.greenlet = None
            for channel in self.channels.values():
                channel.following = False
            self.channels.clear()
