"""Login limits: growing delays per username and per client address (multi-user mode).

Each attempt is counted under three keys: the username from this address (the pair), the
username from any address (a guess spread over many addresses), and this address for any
username (one address trying many accounts). An attempt is reserved, counted as a failure,
atomically *before* its password is hashed (`begin`), so guesses sent at once cannot all
slip in before the first failure is recorded; a good login gives its reservation back.

A key's first `free` failures cost nothing (the address alone gets four times as many as
the pair); the attempt past them is checked and starts a refusal for the key that doubles
with each further failure, from NUMI_LOGIN_DELAY_SECONDS up to NUMI_LOGIN_MAX_DELAY_SECONDS.
Only the attempt that claims a refusal window is checked: while a key is refused, attempts
are answered 429 without checking the password and change nothing, not even the count.

The username alone never refuses anyone: a username guessed from many addresses would
otherwise lock its owner out. Past its allowance (four times `free`), each address gets no
free failures for that username, so every failing address is slowed down at once, while an
address that has not failed still gets its one check, and a browser that logged in as that
user before (a signed device cookie, web/auth.py) keeps its `free` attempts. Failures are
forgotten a day after a key's last one.

The counts live where every process sees them: the database (`login_failures`), or Redis
when NUMI_REDIS_URL is set. Keys are hashes, so mistyped usernames (often passwords) are
not stored in clear.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, Callable, Protocol

from sqlalchemy import case, delete, func, select, update

from .extensions import db
from .models import LoginFailure

FORGET_AFTER_SECONDS = 24 * 3600
# How many more failures the username alone, or the address alone, may have than the pair.
WIDE_SCOPE_FACTOR = 4


class LoginStore(Protocol):
    """Attempt counts and refusal deadlines per key, shared by every process."""

    def refused_until(self, keys: list[str]) -> float:
        """The latest time (clock seconds) until which any of `keys` is refused; 0 if none."""

    def count(self, key: str, delta: int, now: float) -> int:
        """Add `delta` (+1: an attempt, -1: one given back) to `key`'s count atomically (a key
        quiet for a day starts again); returns the new count."""

    def claim(self, key: str, until: float, now: float) -> bool:
        """Refuse `key` until `until` if it is not refused at `now`, atomically: True for the
        one caller that started the refusal, False if one was already running."""

    def forget(self, key: str) -> None:
        """Drop `key`'s count and refusal."""


class LoginThrottle:
    """The login policy over a `LoginStore`; `clock` gives seconds (tests move it by hand)."""

    def __init__(
        self,
        store: LoginStore,
        *,
        free: int,
        delay: float,
        max_delay: float,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.free = max(0, free)
        self.delay = max(0.0, delay)
        self.max_delay = max(self.delay, max_delay)
        self.clock = clock

    def begin(self, username: str, address: str, *, known_device: bool = False) -> int:
        """Reserve one attempt for `username` from `address` before its password is checked.
        0: go ahead (the attempt counts as a failure until `succeeded`); otherwise the whole
        seconds to wait, and nothing was counted. `known_device`: the browser logged in as
        this user before, and is kept outside the username-wide limit."""
        now = self.clock()
        pair, user, addr = self._keys(username, address)
        wait = self._wait_until([pair, addr], now)
        if wait:
            return wait
        wide = self.free * WIDE_SCOPE_FACTOR
        user_count = self.store.count(user, 1, now)
        pair_free = self.free if known_device or user_count <= wide else 0
        counted = [user]
        for key, allowed in ((pair, pair_free), (addr, wide)):
            count = self.store.count(key, 1, now)
            counted.append(key)
            if count > allowed and self.delay > 0:
                # Doubles with each failure past the free ones (the exponent is capped so
                # that a huge count cannot overflow the float).
                delay = min(self.max_delay, self.delay * 2 ** min(count - allowed - 1, 60))
                if not self.store.claim(key, now + delay, now):
                    # Another attempt took this window meanwhile: this one is refused unchecked.
                    for done in counted:
                        self.store.count(done, -1, now)
                    return self._wait_until([pair, addr], now) or 1
        return 0

    def succeeded(self, username: str, address: str) -> None:
        """A good login after `begin`: the pair's count starts again, and the wider keys get
        the reserved attempt back (they keep counting the failures from elsewhere)."""
        now = self.clock()
        pair, user, addr = self._keys(username, address)
        self.store.forget(pair)
        self.store.count(user, -1, now)
        self.store.count(addr, -1, now)

    def _wait_until(self, keys: list[str], now: float) -> int:
        until = self.store.refused_until(keys)
        return math.ceil(until - now) if until > now else 0

    def _keys(self, username: str, address: str) -> tuple[str, str, str]:
        name = username.strip().lower()
        return _key("pair", name, address), _key("user", name), _key("addr", address)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class DatabaseLoginStore:
    """`login_failures` rows: one atomic upsert per attempt and one conditional update per
    refusal, so processes never lose a count or both start one refusal."""

    def refused_until(self, keys: list[str]) -> float:
        until = db.session.execute(
            select(func.max(LoginFailure.blocked_until)).where(LoginFailure.key.in_(keys))
        ).scalar()
        db.session.commit()  # a read transaction is not kept open while the request goes on
        return float(until or 0)

    def count(self, key: str, delta: int, now: float) -> int:
        stale = now - FORGET_AFTER_SECONDS
        dialect = db.engine.dialect.name
        # Only the database's own dialect is loaded (PostgreSQL's is 19 modules).
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert  # lazy: start-up time
        else:
            from sqlalchemy.dialects.sqlite import insert  # lazy: start-up time
        statement = insert(LoginFailure).values(
            key=key, failures=max(0, delta), last_failure_at=now, blocked_until=0.0
        )
        statement = statement.on_conflict_do_update(
            index_elements=[LoginFailure.key],
            set_={
                "failures": case(
                    (LoginFailure.last_failure_at < stale, max(0, delta)),
                    else_=LoginFailure.failures + delta,
                ),
                "last_failure_at": now,
            },
        ).returning(LoginFailure.failures)
        count = db.session.execute(statement).scalar_one()
        if delta > 0:
            # Keys quiet for a day are dropped here, so the table stays as small as the attacks.
            db.session.execute(delete(LoginFailure).where(LoginFailure.last_failure_at < stale))
        db.session.commit()
        return count

    def claim(self, key: str, until: float, now: float) -> bool:
        claimed = db.session.execute(
            update(LoginFailure)
            .where(LoginFailure.key == key, LoginFailure.blocked_until <= now)
            .values(blocked_until=until)
        ).rowcount
        db.session.commit()
        return claimed == 1

    def forget(self, key: str) -> None:
        db.session.execute(delete(LoginFailure).where(LoginFailure.key == key))
        db.session.commit()


_CLAIM_SCRIPT = """
local current = redis.call('GET', KEYS[1])
if current and tonumber(current) > tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""


class RedisLoginStore:
    """Redis keys under `<prefix>login:`: a counter that expires a day after its last attempt,
    and a refusal deadline that expires with the refusal."""

    def __init__(self, client: Any, prefix: str):
        self.client = client
        self.prefix = prefix + "login:"

    def refused_until(self, keys: list[str]) -> float:
        values = self.client.mget([self.prefix + "refused:" + key for key in keys])
        return max((float(value) for value in values if value is not None), default=0.0)

    def count(self, key: str, delta: int, now: float) -> int:
        name = self.prefix + "failures:" + key
        pipe = self.client.pipeline()
        pipe.incrby(name, delta)
        pipe.expire(name, FORGET_AFTER_SECONDS)
        count, _ = pipe.execute()
        return int(count)

    def claim(self, key: str, until: float, now: float) -> bool:
        # Compare and set in one script, so exactly one caller starts the refusal. The key is
        # kept a little past the deadline; the deadline itself is what is compared.
        return bool(
            self.client.eval(
                _CLAIM_SCRIPT,
                1,
                self.prefix + "refused:" + key,
                repr(until),
                repr(now),
                max(1, int((until - now + 1) * 1000)),
            )
        )

    def forget(self, key: str) -> None:
        self.client.delete(self.prefix + "failures:" + key, self.prefix + "refused:" + key)


def throttle_from_config(config: dict[str, Any]) -> LoginThrottle:
    """The throttle for an app: Redis when NUMI_REDIS_URL is set, else the database."""
    url = config.get("NUMI_REDIS_URL")
    if url:
        import redis  # lazy: optional extra redis

        store: LoginStore = RedisLoginStore(
            redis.Redis.from_url(url), config.get("NUMI_REDIS_PREFIX") or "numi:"
        )
    else:
        store = DatabaseLoginStore()
    return LoginThrottle(
        store,
        free=config["NUMI_LOGIN_FREE_ATTEMPTS"],
        delay=config["NUMI_LOGIN_DELAY_SECONDS"],
        max_delay=config["NUMI_LOGIN_MAX_DELAY_SECONDS"],
    )
