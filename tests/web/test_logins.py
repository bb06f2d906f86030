"""Logins that resist guessing (multi-user mode): growing delays per username and per client
address, kept in the database (or Redis) so every process sees them; a memory-hard hash
computed off the gevent hub; old hashes upgraded on the next good login.

Time never passes by sleeping: the tests move the login throttle's clock
(`app.extensions["numi.login_throttle"].clock`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from werkzeug.security import generate_password_hash

from numi.extensions import db
from numi.models import User

# Few free attempts (the username alone and the address alone get 4 x 2 = 8): fewer hashes per test.
LIMITS = {"NUMI_LOGIN_FREE_ATTEMPTS": 2, "NUMI_LOGIN_DELAY_SECONDS": 30, "NUMI_LOGIN_MAX_DELAY_SECONDS": 900}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(multi_app) -> Clock:
    fake = Clock()
    multi_app.extensions["numi.login_throttle"].clock = fake
    return fake


@pytest.fixture
def multi_app(make_app):
    """Multi-user mode with the login limits these tests count on."""
    return make_app(NUMI_AUTH="multi", **LIMITS)


def _post_login(client, username: str, password: str, address: str = "198.51.100.7", **headers):
    return client.post("/login", data={"username": username, "password": password},
                       environ_base={"REMOTE_ADDR": address}, headers=headers)


def _password_hash(app, username: str) -> str:
    with app.app_context():
        db.session.expire_all()
        return db.session.execute(db.select(User.password_hash).where(User.username == username)).scalar_one()


def _logged_in(client) -> bool:
    return client.get("/api/sessions").status_code == 200


def _statuses(responses) -> list[int]:
    return [r.status_code for r in responses]


# --- the limits -------------------------------------------------------------------------------


def test_fifty_bad_logins_are_limited_and_the_right_password_waits_for_the_delay(multi_app, users, clock):
    client = multi_app.test_client()
    alice = users["a"]
    responses = [_post_login(client, "alice", f"guess {i}") for i in range(50)]
    statuses = _statuses(responses)
    # The free attempts and the one that starts the delay are checked; the rest are refused unchecked.
    assert statuses[:3] == [401] * 3 and statuses[3:] == [429] * 47, statuses
    refused = responses[-1]
    assert 1 <= int(refused.headers["Retry-After"]) <= 30
    assert "Too many failed logins" in refused.get_data(as_text=True)
    hash_before = _password_hash(multi_app, "alice")

    # The right password is refused too while the delay runs, and changes nothing.
    right = _post_login(client, "alice", alice.password)
    assert right.status_code == 429 and "Retry-After" in right.headers
    assert not _logged_in(client)
    assert _password_hash(multi_app, "alice") == hash_before
    # A refused attempt does not lengthen the delay.
    assert int(_post_login(client, "alice", "guess").headers["Retry-After"]) <= 30

    clock.now += 31
    assert _post_login(client, "alice", alice.password).status_code == 302
    assert _logged_in(client)


def test_the_delay_grows_with_each_further_failure_up_to_a_lockout(multi_app, users, clock):
    client = multi_app.test_client()
    delays = []
    for _ in range(12):
        for _ in range(10):
            response = _post_login(client, "alice", "wrong")
            if response.status_code == 429:
                delays.append(int(response.headers["Retry-After"]))
                clock.now += delays[-1]
                break
    assert delays[:5] == [30, 60, 120, 240, 480], delays
    assert delays[5:] == [900] * 7, delays


def test_a_good_login_resets_the_count_for_that_username_and_address(multi_app, users, clock):
    client = multi_app.test_client()
    for _ in range(2):
        assert _post_login(client, "alice", "wrong").status_code == 401
    assert _post_login(client, "alice", users["a"].password).status_code == 302
    fresh = multi_app.test_client()
    assert _statuses(_post_login(fresh, "alice", "wrong") for _ in range(3)) == [401] * 3
    assert _post_login(fresh, "alice", users["a"].password).status_code == 429


def test_one_address_guessing_many_usernames_is_limited(multi_app, users, clock):
    client = multi_app.test_client()
    statuses = [_post_login(client, f"user{i}", "wrong").status_code for i in range(12)]
    assert 429 in statuses and statuses[-1] == 429
    # The limit is the address's: another address is not slowed down.
    assert _post_login(client, "bob", users["b"].password, address="203.0.113.9").status_code == 302


def test_one_username_guessed_from_many_addresses_is_limited(multi_app, users, clock):
    client = multi_app.test_client()
    statuses = [_post_login(client, "alice", "wrong", address=f"192.0.2.{i}").status_code for i in range(12)]
    assert 429 in statuses and statuses[-1] == 429
    assert _post_login(client, "alice", users["a"].password, address="203.0.113.9").status_code == 429
    # Only alice is limited: bob logs in from one of those addresses.
    assert _post_login(client, "bob", users["b"].password, address="192.0.2.1").status_code == 302


def test_the_limits_hold_across_processes(make_app, users, multi_app, clock):
    """Two app instances on one database (two gunicorn workers, or two hosts)."""
    other = make_app(NUMI_AUTH="multi", **LIMITS)
    other.extensions["numi.login_throttle"].clock = clock
    first, second = multi_app.test_client(), other.test_client()
    for i in range(3):
        assert _post_login(first if i % 2 else second, "alice", "wrong").status_code == 401
    assert _post_login(first, "alice", users["a"].password).status_code == 429
    assert _post_login(second, "alice", users["a"].password).status_code == 429


def test_the_limits_in_redis(make_app, users, multi_app, clock, redis_url):
    import redis

    url = redis_url
    prefix = f"numi-test-{uuid.uuid4().hex[:12]}:"
    apps = [make_app(NUMI_AUTH="multi", NUMI_REDIS_URL=url, NUMI_REDIS_PREFIX=prefix, **LIMITS) for _ in range(2)]
    for app in apps:
        app.extensions["numi.login_throttle"].clock = clock
    try:
        # The users live in multi_app's database, which the Redis apps share.
        first, second = (app.test_client() for app in apps)
        for i in range(3):
            assert _post_login(first if i % 2 else second, "alice", "wrong").status_code == 401
        refused = _post_login(first, "alice", users["a"].password)
        assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 30
        assert _post_login(second, "alice", users["a"].password).status_code == 429
        clock.now += 31
        assert _post_login(second, "alice", users["a"].password).status_code == 302
        # Nothing went to the database store.
        assert multi_app.extensions["numi.login_throttle"].store.__class__.__name__ == "DatabaseLoginStore"
        assert apps[0].extensions["numi.login_throttle"].store.__class__.__name__ == "RedisLoginStore"
    finally:
        client = redis.Redis.from_url(url)
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)


def test_proxy_headers_are_ignored_unless_proxies_are_trusted(make_app, users, multi_app, clock):
    client = multi_app.test_client()
    # Without NUMI_TRUSTED_PROXIES a client cannot dodge the address limit with X-Forwarded-For.
    statuses = [_post_login(client, f"user{i}", "wrong", **{"X-Forwarded-For": f"192.0.2.{i}"}).status_code
                for i in range(12)]
    assert statuses[-1] == 429

    proxied = make_app(NUMI_AUTH="multi", NUMI_TRUSTED_PROXIES=1, **LIMITS)
    proxied.extensions["numi.login_throttle"].clock = clock
    behind = proxied.test_client()
    statuses = [_post_login(behind, f"user{i}", "wrong", address="127.0.0.1",
                            **{"X-Forwarded-For": f"192.0.2.{i}"}).status_code for i in range(12)]
    # Behind one trusted proxy each forwarded address is a client of its own.
    assert 429 not in statuses


# --- hashing ----------------------------------------------------------------------------------


def test_an_old_werkzeug_hash_is_upgraded_on_a_good_login_only(multi_app, clock):
    with multi_app.app_context():
        for name, method in (("carol", "scrypt"), ("dave", "pbkdf2:sha256")):
            db.session.add(User(username=name, password_hash=generate_password_hash("old password 1", method=method)))
        db.session.commit()
    client = multi_app.test_client()
    for name in ("carol", "dave"):
        old = _password_hash(multi_app, name)
        assert _post_login(client, name, "wrong password").status_code == 401
        assert _password_hash(multi_app, name) == old
        assert _post_login(client, name, "old password 1").status_code == 302
        assert _password_hash(multi_app, name).startswith("$argon2id$")
        client.post("/logout")
        assert _post_login(client, name, "old password 1").status_code == 302
        client.post("/logout")


def test_numi_user_create_stores_an_argon2_hash(multi_app, database_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
    env.update(NUMI_AUTH="multi", NUMI_DATABASE_URL=database_url, NUMI_DATA_DIR=multi_app.config["NUMI_DATA_DIR"],
               NUMI_AUTO_ENDPOINTS="0")
    script = Path(sys.executable).with_name("numi")
    subprocess.run([str(script), "user", "create", "erin", "--password-stdin"], input="a long password\n",
                   env=env, text=True, check=True, capture_output=True, timeout=60)
    assert _password_hash(multi_app, "erin").startswith("$argon2id$")
    assert _post_login(multi_app.test_client(), "erin", "a long password").status_code == 302


def test_concurrent_logins_do_not_block_other_greenlets(multi_app, users):
    """While password hashes are computed, the hub serves other requests: bob's request,
    started after five login attempts, finishes before any of them (a hash computed on the
    hub would run each login to its end first)."""
    import gevent

    finished: list[str] = []

    def attempt(i: int):
        _post_login(multi_app.test_client(), "alice", f"wrong {i}")
        finished.append(f"login {i}")

    def other_user():
        response = multi_app.test_client().get("/api/sessions", headers=users["b"].auth_header)
        assert response.status_code == 200
        finished.append("bob")

    greenlets = [gevent.spawn(attempt, i) for i in range(5)] + [gevent.spawn(other_user)]
    gevent.joinall(greenlets, raise_error=True, timeout=60)
    assert len(finished) == 6, finished
    assert finished[0] == "bob", finished


# --- two real `numi serve` processes on one database ----------------------------------------


def _form_login(url: str, username: str, password: str) -> tuple[int, dict]:
    """POST the login form over real HTTP without following the redirect: (status, headers)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    body = urllib.parse.urlencode({"username": username, "password": password}).encode()
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url + "/login", data=body), timeout=60) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_two_live_servers_share_the_limits(live_server_factory, tmp_path):
    """Failures counted by one `numi serve` refuse logins at another on the same database."""
    env = {"NUMI_AUTH": "multi", "NUMI_LOGIN_FREE_ATTEMPTS": "2", "NUMI_LOGIN_DELAY_SECONDS": "600",
           "NUMI_DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}"}
    first = live_server_factory(**env)
    second = live_server_factory(**env)
    try:
        first.cli("user", "create", "alice", "--password-stdin", input="the right password\n")
        assert [_form_login(server.url, "alice", "wrong")[0] for server in (first, second, first)] == [401] * 3
        status, headers = _form_login(second.url, "alice", "the right password")
        assert status == 429 and 590 <= int(headers["Retry-After"]) <= 600
        assert _form_login(first.url, "alice", "the right password")[0] == 429
    finally:
        first.stop()
        second.stop()


def test_a_test_suite_fast_hash_is_replaced_at_full_strength_without_the_setting(make_app, users, multi_app):
    """NUMI_TEST_FAST_PASSWORD_HASHES (the suite's apps have it) is never a weaker hash in
    use: an app without it verifies such a hash once and stores RFC 9106's parameters."""
    from argon2 import PasswordHasher

    fast = _password_hash(multi_app, "alice")
    assert "m=8,t=1,p=1" in fast, "the suite's apps hash at the test cost"
    production = make_app(NUMI_AUTH="multi", NUMI_TEST_FAST_PASSWORD_HASHES=False)
    assert _post_login(production.test_client(), "alice", users["a"].password).status_code == 302
    strong = _password_hash(production, "alice")
    assert strong != fast and not PasswordHasher().check_needs_rehash(strong)
    assert "m=65536,t=3,p=4" in strong
