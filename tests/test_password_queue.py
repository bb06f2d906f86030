"""The order of password checks (numi/password_queue.py, issue 34): the quietest address and
account first, and a thread that only quiet checks may take. Each check here holds its slot
until the test lets it go, so the order is the queue's, not the hashes'."""

from __future__ import annotations

import gevent
from gevent.event import Event

from numi.password_queue import PasswordQueue
from server_wait import WAIT_SECONDS


class Checks:
    """Checks run through `queue`, each holding its slot until `finish(name)`."""

    def __init__(self, queue: PasswordQueue):
        self.queue = queue
        self.started: list[str] = []
        self.done: dict[str, Event] = {}

    def ask(self, name: str, address: str, account: str) -> gevent.Greenlet:
        self.done[name] = Event()

        def work():
            self.started.append(name)
            self.done[name].wait()

        return gevent.spawn(self.queue.run, work, address=address, account=account)

    def settle(self, started: int) -> None:
        """Wait until `started` checks have started (their greenlets ran)."""
        with gevent.Timeout(10):
            while len(self.started) < started:
                gevent.sleep(0)
        gevent.sleep(0)  # any further admission would have started by now
        assert len(self.started) == started, self.started

    def finish(self, name: str) -> None:
        self.done[name].set()


def test_a_first_login_goes_ahead_of_the_guesses_and_takes_the_reserved_thread():
    checks = Checks(PasswordQueue(1, reserved=1))
    greenlets = [checks.ask(f"guess {n}", "192.0.2.1", "bob") for n in range(6)]
    # The first guess takes the shared thread, the second (still quiet) the reserved one.
    checks.settle(2)
    greenlets.append(checks.ask("carol", "192.0.2.1", "carol"))  # behind the same NAT
    checks.settle(2)
    # The reserved thread frees: the guesses are no longer quiet, carol is.
    checks.finish("guess 1")
    checks.settle(3)
    assert checks.started[-1] == "carol"
    # The shared thread frees: the next guess, in order of arrival.
    checks.finish("guess 0")
    checks.settle(4)
    assert checks.started[-1] == "guess 2"
    for name in checks.done:
        checks.finish(name)
    gevent.joinall(greenlets, raise_error=True, timeout=WAIT_SECONDS)
    assert checks.started[4:] == ["guess 3", "guess 4", "guess 5"]
    assert checks.queue.running == checks.queue.running_reserved == 0


def test_the_quietest_address_and_account_are_admitted_first():
    checks = Checks(PasswordQueue(1, reserved=0))
    greenlets = [checks.ask("busy 0", "192.0.2.1", "bob")]
    checks.settle(1)
    greenlets += [checks.ask(f"busy {n}", "192.0.2.1", "bob") for n in range(1, 4)]
    greenlets.append(checks.ask("other address", "198.51.100.1", "bob"))
    greenlets.append(checks.ask("other account", "192.0.2.1", "dave"))
    greenlets.append(checks.ask("both other", "203.0.113.1", "erin"))
    for name in checks.done:
        checks.finish(name)
    gevent.joinall(greenlets, raise_error=True, timeout=WAIT_SECONDS)
    # Scores when the first ends: each busy check 5 + 5, the other address 1 + 5, the other
    # account 5 + 1 (equal: in order of arrival), both others 1 + 1.
    assert checks.started == [
        "busy 0",
        "both other",
        "other address",
        "other account",
        "busy 1",
        "busy 2",
        "busy 3",
    ]


def test_a_check_given_up_while_waiting_leaves_the_queue():
    checks = Checks(PasswordQueue(1, reserved=0))
    first = checks.ask("first", "192.0.2.1", "bob")
    checks.settle(1)
    waiting = checks.ask("given up", "192.0.2.2", "carol")
    gevent.sleep(0)
    waiting.kill()
    assert checks.queue.waiting == []
    checks.finish("first")
    first.join(timeout=10)
    assert checks.queue.running == 0
