"""Login limits: growing delays per username and per client address (multi-user mode).

Each attempt is counted under three keys: the username from this address, the username from
any address (a guess spread over many addresses), and this address for any username (one
address trying many accounts). A key's first `free` failures cost nothing (the username and
the address alone get four times as many as the pair); each further failure refuses logins
for that key for a delay that doubles, from NUMI_LOGIN_DELAY_SECONDS up to
NUMI_LOGIN_MAX_DELAY_SECONDS (a temporary lockout). While a key is refused, attempts are
answered 429 without checking the password and change nothing, not even the count. A good
login clears the username-and-address key only: the other two keep counting the guesses
that came from elsewhere. Failures are forgotten a day after a key's last one.

The counts live where every process sees them: the database (`login_failures`), or Redis
when NUMI_REDIS_URL is set. Keys are hashes, so mistyped usernames (often passwords) are
not stored in clear.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, Callable, Protocol

FORGET_AFTER_SECONDS = 24 * 3600
# How many more failures the username alone, or the address alone, may have than the pair.
WIDE_SCOPE_FACTOR = 4


class LoginStore(Protocol):
    """Failure counts and refusal deadlines per key, shared by every process."""

    def refused_until(self, keys: list[str]) -> float:
        """The latest time (clock seconds) until which any of `keys` is refused; 0 if none."""

    def add_failure(self, key: str, now: float) -> int:
        """Count one more failure of `key` (a key quiet for a day starts again); returns the count."""

    def refuse(self, key: str, until: float, now: float) -> None:
        """Refuse `key` until `until` (never shortens a longer refusal)."""

    def forget(self, key: str) -> None:
        """Drop `key`'s failures and refusal."""


class LoginThrottle:
    """The login policy over a `LoginStore`; `clock` gives seconds (tests move it by hand)."""

    def __init__(self, store: LoginStore, *, free: int, delay: float, max_delay: float,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.free = max(0, free)
        self.delay = max(0.0, delay)
        self.max_delay = max(self.delay, max_delay)
        self.clock = clock

    def retry_after(self, username: str, address: str) -> int:
        """Whole seconds until a login for `username` from `address` is allowed; 0: now."""
        now = self.clock()
        until = self.store.refused_until([key for key, _ in self._keys(username, address)])
        return math.ceil(until - now) if until > now else 0

    def failed(self, username: str, address: str) -> None:
        """Count a failed login and start a delay for every key past its free attempts."""
        now = self.clock()
        for key, allowed in self._keys(username, address):
            count = self.store.add_failure(key, now)
            if count > allowed and self.delay > 0:
                # Doubles with each failure past the free ones (the exponent is capped so
                # that a huge count cannot overflow the float).
                wait = min(self.max_delay, self.delay * 2 ** min(count - allowed - 1, 60))
                self.store.refuse(key, now + wait, now)

    def succeeded(self, username: str, address: str) -> None:
        """A good login: the count of this username from this address starts again."""
        pair_key, _ = self._keys(username, address)[0]
        self.store.forget(pair_key)

    def _keys(self, username: str, address: str) -> list[tuple[str, int]]:
        name = username.strip().lower()
        wide = self.free * WIDE_SCOPE_FACTOR
        return [
            (_key("pair", name, address), self.free),
            (_key("user", name), wide),
            (_key("addr", address), wide),
        ]


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class DatabaseLoginStore:
    """`login_failures` rows: one atomic upsert per failure, so processes never lose a count."""

    def refused_until(self, keys: list[str]) -> float:
        from sqlalchemy import func, select

        from .extensions import db
        from .models import LoginFailure

        until = db.session.execute(
            select(func.max(LoginFailure.blocked_until)).where(LoginFailure.key.in_(keys))
        ).scalar()
        db.session.commit()  # a read transaction is not kept open while the request goes on
        return float(until or 0)

    def add_failure(self, key: str, now: float) -> int:
        from sqlalchemy import case, delete

        from .extensions import db
        from .models import LoginFailure

        stale = now - FORGET_AFTER_SECONDS
        dialect = db.engine.dialect.name
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(LoginFailure).values(key=key, failures=1, last_failure_at=now, blocked_until=0.0)
        statement = statement.on_conflict_do_update(
            index_elements=[LoginFailure.key],
            set_={
                "failures": case((LoginFailure.last_failure_at < stale, 1), else_=LoginFailure.failures + 1),
                "last_failure_at": now,
            },
        ).returning(LoginFailure.failures)
        count = db.session.execute(statement).scalar_one()
        # Keys quiet for a day are dropped here, so the table stays as small as the attacks.
        db.session.execute(delete(LoginFailure).where(LoginFailure.last_failure_at < stale))
        db.session.commit()
        return count

    def refuse(self, key: str, until: float, now: float) -> None:
        from sqlalchemy import update

        from .extensions import db
        from .models import LoginFailure

        db.session.execute(
            update(LoginFailure).where(LoginFailure.key == key, LoginFailure.blocked_until < until)
            .values(blocked_until=until)
        )
        db.session.commit()

    def forget(self, key: str) -> None:
        from sqlalchemy import delete

        from .extensions import db
        from .models import LoginFailure

        db.session.execute(delete(LoginFailure).where(LoginFailure.key == key))
        db.session.commit()


class RedisLoginStore:
    """Redis keys under `<prefix>login:`: a counter that expires a day after its last failure,
    and a refusal deadline that expires with the refusal."""

    def __init__(self, client: Any, prefix: str):
        self.client = client
        self.prefix = prefix + "login:"

    def refused_until(self, keys: list[str]) -> float:
        values = self.client.mget([self.prefix + "refused:" + key for key in keys])
        return max((float(value) for value in values if value is not None), default=0.0)

    def add_failure(self, key: str, now: float) -> int:
        name = self.prefix + "failures:" + key
        pipe = self.client.pipeline()
        pipe.incr(name)
        pipe.expire(name, FORGET_AFTER_SECONDS)
        count, _ = pipe.execute()
        return int(count)

    def refuse(self, key: str, until: float, now: float) -> None:
        name = self.prefix + "refused:" + key
        current = self.client.get(name)
        if current is not None and float(current) >= until:
            return
        # Kept a little past the deadline; the deadline itself is what is compared.
        self.client.set(name, repr(until), px=max(1, int((until - now + 1) * 1000)))

    def forget(self, key: str) -> None:
        self.client.delete(self.prefix + "failures:" + key, self.prefix + "refused:" + key)


def throttle_from_config(config: dict[str, Any]) -> LoginThrottle:
    """The throttle for an app: Redis when NUMI_REDIS_URL is set, else the database."""
    url = config.get("NUMI_REDIS_URL")
    if url:
        import redis

        store: LoginStore = RedisLoginStore(redis.Redis.from_url(url), config.get("NUMI_REDIS_PREFIX") or "numi:")
    else:
        store = DatabaseLoginStore()
    return LoginThrottle(
        store,
        free=config["NUMI_LOGIN_FREE_ATTEMPTS"],
        delay=config["NUMI_LOGIN_DELAY_SECONDS"],
        max_delay=config["NUMI_LOGIN_MAX_DELAY_SECONDS"],
    )
