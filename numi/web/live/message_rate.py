"""Token buckets that bound how fast one client may send WebSocket messages (issue 28).

Every client message costs a parse and often a database read on the server's event loop:
145k messages in 10 s on one socket delayed another user's next request by 14 s. Each
socket gets its own bucket, and each user one more per process shared by all their
sockets, so opening more tabs does not multiply the allowance. A socket that empties
either bucket has flooded: the handler sends `rate_limited_client` and closes it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import gevent
from gevent.lock import Semaphore

# Users whose bucket has been idle this long are forgotten (a full bucket again anyway).
_IDLE_SECONDS = 60.0


@dataclass
class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; `take()` spends one if there is one."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self):
        self.tokens = self.burst
        self.updated = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class UserMessageBuckets:
    """One bucket per user in this process (`services().ws_user_buckets`)."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.buckets: dict[int, TokenBucket] = {}
        self.lock = Semaphore()

    def take(self, user_id: int) -> bool:
        """Spend one of `user_id`'s tokens; False when the user is over the limit."""
        with self.lock:
            bucket = self.buckets.get(user_id)
            if bucket is None:
                if len(self.buckets) > 1000:
                    self._forget_idle()
                bucket = self.buckets[user_id] = TokenBucket(self.rate, self.burst)
            return bucket.take()

    def _forget_idle(self) -> None:
        cutoff = time.monotonic() - _IDLE_SECONDS
        for user_id in [u for u, b in self.buckets.items() if b.updated < cutoff]:
            del self.buckets[user_id]


def socket_bucket(config) -> TokenBucket:
    """A new socket's own bucket, from the settings."""
    return TokenBucket(config["NUMI_WS_MESSAGES_PER_SECOND"], config["NUMI_WS_MESSAGE_BURST"])


def user_buckets_from_config(config) -> UserMessageBuckets:
    """The process's per-user buckets, from the settings (made in create_app)."""
    rate = config["NUMI_WS_USER_MESSAGES_PER_SECOND"]
    return UserMessageBuckets(rate, 2 * rate)


class YieldingReaderEvent(threading.Event):
    """The event simple_websocket's reader sets for each message it has read: setting it
    also yields to the hub. Without that, a reader whose socket buffer holds a flood parses
    all of it (a megabyte is tens of thousands of messages) before the handler, or any
    other user's request, runs again; with it the handler counts each message as it comes
    and closes a flooding socket within its burst. (`SOCK_SERVER_OPTIONS["event_class"]`)"""

    def set(self) -> None:
        super().set()
        gevent.sleep(0)
