"""Password hashes: argon2id (memory-hard), computed off the gevent hub.

A password hash costs about a fifth of a second of CPU and 64 MiB on purpose. Computed on the
hub it would stop every stream of every user for that long (a handful of bogus logins once
slowed another user's stream from 41 ms to 931 ms per token), so each hash runs in a small
thread pool of its own and the calling greenlet waits without blocking the hub. The pool
is not the hub's shared one: that one also resolves host names for provider requests, and
its ten threads could hold 640 MiB of hashing memory at once. argon2 releases the GIL.
A check waits for a thread in a queue that admits the client address and account that asked
least lately first (numi/password_queue.py), so a flood of guesses never delays a first login.

Hashes made by werkzeug (pbkdf2, scrypt: users created before argon2) still verify, and a
good login replaces them with argon2id, as does a hash made with weaker argon2 parameters.

Numi's own test suite logs in hundreds of times; `NUMI_TEST_FAST_PASSWORD_HASHES` gives its
apps argon2id at the smallest cost (one pass over 8 KiB). That is a test setting, never a
profile for use: a server started without it rehashes any such hash at the user's next login,
exactly as it upgrades an old werkzeug hash, and one started with it warns at start-up.
"""

from __future__ import annotations

import os
import secrets
import threading
from typing import Any, Callable

import gevent
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from flask import current_app, has_app_context
from werkzeug.security import check_password_hash

from .cpu_pool import hub_pool
from .password_queue import PasswordQueue

# argon2-cffi's defaults are RFC 9106's low-memory profile: t=3, m=64 MiB, p=4.
_hasher = PasswordHasher()
# Tests only (see the module docstring): about 0.1 ms a hash instead of 0.2 s.
_test_hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
FAST_HASHES_SETTING = "NUMI_TEST_FAST_PASSWORD_HASHES"
# Half the cores: hashing never takes every core from the hub that serves the streams.
HASH_THREADS = max(1, (os.cpu_count() or 2) // 2)
# The lowest CPU priority for the hashing threads: when the machine is busy, the thread that
# serves the streams gets the CPU first and logins wait instead. Measured (bench/logins.py,
# 2 busy cores): nice 19 added a median 12 ms to another stream's p95 token latency, nice 10
# 30 ms. The price: on a machine whose cores a local model keeps busy, a login takes seconds.
HASH_NICENESS = 19
_POOL_ATTRIBUTE = "numi_password_pool"
_QUEUE_ATTRIBUTE = "numi_password_queue"
_thread_state = threading.local()
_dummy_hash: str | None = None


def hash_password(password: str) -> str:
    """The argon2id hash of `password` (computed in the hashing pool)."""
    return _off_hub(_current_hasher().hash, password)


def check_password(
    stored: str | None,
    password: str,
    *,
    lane: str = "main",
    address: str = "",
    account: str = "",
) -> tuple[bool, str | None]:
    """Whether `password` matches the `stored` hash, and a new hash to store when the stored
    one is old (werkzeug's, or argon2 with weaker parameters); None when it is current.

    A missing hash (unknown user, no password) costs the same time as a real check, so the
    answer's timing does not tell which usernames exist.

    `lane` "known": a browser that logged in as this user before, hashed in a lane of its
    own (one thread) so that bogus logins queued in the main lane never delay its owner.
    In the main lane, `address` (the client's) and `account` (the typed username) place the
    check in the queue (numi/password_queue.py): those that asked least lately go first.
    """
    return _off_hub(
        _check, _current_hasher(), stored, password, lane=lane, address=address, account=account
    )


def _current_hasher() -> PasswordHasher:
    """The hasher of the running app: the standard one unless the app is a test app with
    NUMI_TEST_FAST_PASSWORD_HASHES (outside an app, always the standard one)."""
    if has_app_context() and current_app.config.get(FAST_HASHES_SETTING):
        return _test_hasher
    return _hasher


def _check(hasher: PasswordHasher, stored: str | None, password: str) -> tuple[bool, str | None]:
    if not stored:
        _verify_argon2(_dummy(hasher), password)
        return False, None
    if stored.startswith("$argon2"):
        if not _verify_argon2(stored, password):
            return False, None
        return True, (hasher.hash(password) if hasher.check_needs_rehash(stored) else None)

    try:
        matches = check_password_hash(stored, password)
    except ValueError:  # an unknown hash format: never matches
        matches = False
    return (True, hasher.hash(password)) if matches else (False, None)


def _verify_argon2(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


def _dummy(hasher: PasswordHasher) -> str:
    # The dummy costs what a real hash of this hasher costs (the point of it).
    if hasher is _test_hasher:
        return _test_hasher.hash("unknown user")
    global _dummy_hash
    if _dummy_hash is None:  # two threads may both make one: harmless
        _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))
    return _dummy_hash


def _off_hub(
    function: Callable[..., Any],
    *args: Any,
    lane: str = "main",
    address: str = "",
    account: str = "",
) -> Any:
    """Run `function(*args)` in this hub's hashing pool of `lane` (the main lane's through
    its queue); the greenlet waits, the hub runs on."""
    if lane != "main":
        pool = hub_pool(f"{_POOL_ATTRIBUTE}_{lane}", 1)
        return pool.apply(_niced, (function, args))

    hub = gevent.get_hub()
    queue = getattr(hub, _QUEUE_ATTRIBUTE, None)
    if queue is None:  # one per hub, as its pool: gevent's events belong to one hub
        queue = PasswordQueue(HASH_THREADS, reserved=1)
        setattr(hub, _QUEUE_ATTRIBUTE, queue)
    pool = hub_pool(_POOL_ATTRIBUTE, queue.threads)
    return queue.run(
        lambda: pool.apply(_niced, (function, args)),
        address=address,
        account=account,
    )


def _niced(function: Callable[..., Any], args: tuple) -> Any:
    # Linux sets the priority of one thread (its native id) this way.
    if not getattr(_thread_state, "niced", False):
        _thread_state.niced = True
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_NICENESS)
        except (AttributeError, OSError):  # not Linux, or not permitted: run at normal priority
            pass
    return function(*args)
