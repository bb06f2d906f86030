"""The queue in front of the password hashing threads: the least demanding caller goes first.

A password check costs a fifth of a second of a hashing thread, and there are few of them
(half the cores). Served first come, first served, twenty loops of bogus logins kept the
threads' queue full, and a first login (a new browser, a private window: no device cookie,
so not in the known devices' lane) waited behind all of it: 24 to 42 s (issue 34).

So a check waits here until a thread is free, and the next one admitted is the one whose
client address and account have asked for the fewest checks lately: a score per address
and per account that grows by one with each check asked for and halves every
`HALF_LIFE_SECONDS`, the two added up. A guesser's address and the account it guesses have
large scores; a first login has small ones (a new address, or an account that is not being
guessed, even from the guesser's own address behind the same NAT), so it goes ahead of the
guessers' queue. Equal scores go in order of arrival. It does not even wait for the running
check: one more thread is reserved for quiet checks (whose address or account has asked at
most `QUIET_SCORE` lately), a share of the hashing that busy guessers cannot take. A guesser
can spread over addresses and accounts, but every address it uses and every account it
tries then competes on its own small share, never ahead of an owner who asks once (and
one that spreads can share the reserved thread, in the same order).

Accounts are keyed by a hash of the typed name (often a mistyped password); nothing here is
stored or outlives the process.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gevent.event import Event

HALF_LIFE_SECONDS = 60.0
# A check whose address or account has asked for at most this much lately (one or two
# checks in the last minute) is quiet, and may also take a reserved slot.
QUIET_SCORE = 2.5
# Past this many remembered keys, those whose score has decayed below `FORGOTTEN` are dropped.
MAX_KEYS = 10_000
FORGOTTEN = 0.05


@dataclass
class _Waiter:
    keys: tuple[str, ...]
    order: int
    admitted: Any = field(default=None)  # a gevent Event, made on the hub's thread
    reserved: bool = False  # admitted to a reserved slot


class PasswordQueue:
    """Admission to `slots` hashing threads of one hub, least recent demand first, and to
    `reserved` more that only quiet checks may take. `clock` gives seconds (tests may move
    it by hand)."""

    def __init__(self, slots: int, reserved: int = 1, clock: Callable[[], float] = time.monotonic):
        self.slots = max(1, slots)
        self.reserved = max(0, reserved)
        self.clock = clock
        self.running = 0
        self.running_reserved = 0
        self.waiting: list[_Waiter] = []
        self._demand: dict[str, tuple[float, float]] = {}  # key -> (score, when)
        self._order = itertools.count()

    @property
    def threads(self) -> int:
        """How many hashing threads the queue's pool needs."""
        return self.slots + self.reserved

    def run(self, function: Callable[..., Any], *, address: str, account: str) -> Any:
        """`function()` once a slot is free and no waiting check from a quieter address or
        account is ahead of it; the calling greenlet waits, the hub runs on."""
        keys = tuple(key for key in (_address_key(address), _account_key(account)) if key)
        now = self.clock()
        for key in keys:
            self._demand[key] = (self._score(key, now) + 1.0, now)
        waiter = _Waiter(keys, next(self._order), Event())
        if self.running < self.slots and not self.waiting:
            self.running += 1
        elif self.running_reserved < self.reserved and self._quiet(waiter, now):
            self.running_reserved += 1
            waiter.reserved = True
        else:
            self.waiting.append(waiter)
            try:
                waiter.admitted.wait()
            except BaseException:
                # Given up while waiting (the greenlet was killed): free the slot if it was
                # handed over meanwhile, else leave the queue.
                if waiter.admitted.is_set():
                    self._release(waiter.reserved)
                else:
                    self.waiting.remove(waiter)
                raise
        try:
            return function()
        finally:
            self._release(waiter.reserved)

    def _release(self, reserved: bool) -> None:
        if reserved:
            self.running_reserved -= 1
        else:
            self.running -= 1
        now = self.clock()
        while self.running < self.slots and self.waiting:
            self._admit(self._next(self.waiting, now), reserved=False)
        quiet = [waiter for waiter in self.waiting if self._quiet(waiter, now)]
        while self.running_reserved < self.reserved and quiet:
            chosen = self._next(quiet, now)
            quiet.remove(chosen)
            self._admit(chosen, reserved=True)
        if len(self._demand) > MAX_KEYS:
            self._demand = {
                key: (score, when)
                for key, (score, when) in self._demand.items()
                if self._score(key, now) >= FORGOTTEN
            }

    def _admit(self, waiter: _Waiter, *, reserved: bool) -> None:
        self.waiting.remove(waiter)
        waiter.reserved = reserved
        if reserved:
            self.running_reserved += 1
        else:
            self.running += 1
        waiter.admitted.set()

    def _next(self, waiters: list[_Waiter], now: float) -> _Waiter:
        # The lowest demand of address and account together; equal ones in order of arrival.
        return min(waiters, key=lambda w: (sum(self._score(k, now) for k in w.keys), w.order))

    def _quiet(self, waiter: _Waiter, now: float) -> bool:
        # Either is enough: a new browser behind a guesser's address (its account is quiet),
        # or an owner whose account is being guessed from elsewhere (their address is quiet).
        # A check without keys (a new password being hashed, the user signed in) is quiet.
        return not waiter.keys or any(self._score(k, now) <= QUIET_SCORE for k in waiter.keys)

    def _score(self, key: str, now: float) -> float:
        score, when = self._demand.get(key, (0.0, now))
        return score * math.pow(0.5, max(0.0, now - when) / HALF_LIFE_SECONDS)


def _address_key(address: str) -> str:
    return "address:" + address if address else ""


def _account_key(account: str) -> str:
    name = account.strip().lower()
    return "account:" + hashlib.sha256(name.encode()).hexdigest()[:32] if name else ""
