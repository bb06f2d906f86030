"""Fairness under CPU-heavy requests (issue 34): does one user's expensive request stall others?

Multi-user Numi on loopback with the scripted provider; every figure is a ratio to an idle
baseline measured in the same run, three runs, the median.

- markdown: alice's turn latency (send → turn_end over the JSON WebSocket; the turn's
  provider request resolves its host in gevent's threadpool) while 12 users each ask "Show
  as markdown" for their own 198,000-character answer at once (12 renders, none cached:
  each user's one render is what the per-user limit lets through, the worst case for
  everyone else), against the same turn while nothing else runs. p95 of each.
- first login: a browser with no device cookie logging in as carol (POST /login → 302)
  while 20 loops post wrong passwords for bob as fast as they are answered, all from the
  same address (loopback: as behind one NAT), against the same login when quiet. The login
  limits are set out of reach (NUMI_LOGIN_FREE_ATTEMPTS=1000000), so every guess that is
  let in computes a full argon2id hash.

    python bench/fairness.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from live import LiveNumi  # noqa: E402
from logins import LOGIN_CLIENTS, LOGIN_WORKER, Alice  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402
from stats import percentile, row, table  # noqa: E402

RENDERS = 12
LONG_CHARS = 198_000
PARAGRAPH = (
    "Some **bold** text with `code`, a [link](https://example.org) and *emphasis* in a line.\n\n"
    "- item one\n- item _two_\n\n"
)
IDLE_TURNS = 5
QUIET_LOGINS = 3
PASSWORD = "a long password"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def reader_tokens(numi: LiveNumi) -> list[str]:
    """API tokens of `RENDERS` ordinary users (readers of their own long answers)."""
    tokens = []
    for n in range(RENDERS):
        tokens.append(numi.add_user(f"reader{n}", PASSWORD))
    return tokens


def long_answer(numi: LiveNumi, token: str, tag: str) -> str:
    """A new chat of the token's user whose answer is `LONG_CHARS` long (written straight
    into the database, as an old chat would be): the URL of its "Show as markdown"."""
    request = urllib.request.Request(
        numi.url + "/api/session",
        data=b"{}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        chat_id = json.loads(response.read())["id"]
    # A new text each run: a rendering is cached per process by its text.
    text = (f"{tag}\n\n" + PARAGRAPH * (LONG_CHARS // len(PARAGRAPH) + 1))[:LONG_CHARS]
    now = datetime.utcnow().isoformat(" ")
    with sqlite3.connect(f"{numi.data_dir}/numi.db") as connection:
        connection.execute(
            "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            (chat_id, "user", "Write a lot", now),
        )
        answer = connection.execute(
            "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            (chat_id, "assistant", text, now),
        ).lastrowid
    return f"{numi.url}/c/{chat_id}/messages/{answer}/markdown"


class Turns:
    """Alice's short turns in one chat over the JSON WebSocket."""

    def __init__(self, alice: Alice, provider: ScriptedProvider):
        from numi.testing.websocket_client import WebSocketClient as Client

        self.provider = provider
        chat_id = alice.post(
            "/api/session", {"endpoint_id": alice.endpoint_id, "model": "bench-model"}
        )["id"]
        self.ws = Client.connect(
            f"ws://127.0.0.1:{alice.numi.port}/ws/{chat_id}?format=json",
            headers={"Origin": alice.numi.url, "Authorization": f"Bearer {alice.token}"},
        )

    def seconds(self) -> float:
        """One turn: send → turn_end."""
        self.provider.enqueue(Scenario().text("Fine, thanks."))
        started = time.perf_counter()
        self.ws.send(json.dumps({"type": "send", "message": "How are you?"}))
        while True:
            raw = self.ws.receive(timeout=120)
            if raw is None:
                raise TimeoutError("no turn_end")
            if json.loads(raw)["type"] == "turn_end":
                return time.perf_counter() - started

    def close(self) -> None:
        self.ws.close()


def markdown_run(numi: LiveNumi, turns: Turns, tokens: list[str], run: int) -> dict:
    urls = [long_answer(numi, token, f"run {run} reader {n}") for n, token in enumerate(tokens)]
    idle = [turns.seconds() for _ in range(IDLE_TURNS)]
    statuses: list[int] = []

    def show(url: str, token: str) -> None:
        request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {token}", "HX-Request": "true"}
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                response.read()
                statuses.append(response.status)
        except urllib.error.HTTPError as error:
            statuses.append(error.code)

    threads = [threading.Thread(target=show, args=pair) for pair in zip(urls, tokens)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    loaded = []
    while any(thread.is_alive() for thread in threads) or not loaded:
        loaded.append(turns.seconds())
    for thread in threads:
        thread.join()
    return {
        "idle": percentile(idle, 95),
        "loaded": percentile(loaded, 95),
        "turns": len(loaded),
        "renders_ok": sum(status == 200 for status in statuses),
        "render_seconds": time.perf_counter() - started,
    }


def first_login_seconds(numi: LiveNumi) -> float:
    """carol signs in from a browser that never did (no cookies): POST /login → 302."""
    body = urllib.parse.urlencode({"username": "carol", "password": PASSWORD}).encode()
    request = urllib.request.Request(numi.url + "/login", data=body, headers={"Origin": numi.url})
    opener = urllib.request.build_opener(NoRedirect)
    started = time.perf_counter()
    try:
        opener.open(request, timeout=600)
        status = 200
    except urllib.error.HTTPError as error:
        status = error.code
    elapsed = time.perf_counter() - started
    if status != 302:
        raise RuntimeError(f"carol's login answered {status}")
    return elapsed


def login_run(numi: LiveNumi) -> dict:
    quiet = statistics.median(first_login_seconds(numi) for _ in range(QUIET_LOGINS))
    flood = subprocess.Popen(
        [sys.executable, "-c", LOGIN_WORKER, numi.url, numi.url, str(LOGIN_CLIENTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert flood.stdout.readline().strip() == "started"
        time.sleep(0.5)  # the flood is under way (checks queued) before the login
        during = [first_login_seconds(numi) for _ in range(QUIET_LOGINS)]
    finally:
        flood.stdin.write("stop\n")
        flood.stdin.flush()
        count, _, wrong = flood.stdout.readline().split()
        flood.wait(60)
    return {"quiet": quiet, "during": max(during), "guesses": int(count), "hashed": int(wrong)}


def measure(runs: int = 3) -> list[dict]:
    with ScriptedProvider() as provider:
        with LiveNumi(NUMI_AUTH="multi", NUMI_LOGIN_FREE_ATTEMPTS="1000000") as numi:
            alice = Alice(numi, provider)
            numi.cli("user", "create", "carol", "--password-stdin", input=PASSWORD + "\n")
            tokens = reader_tokens(numi)
            turns = Turns(alice, provider)
            turns.seconds()  # the first turn imports the SDK
            renders = [markdown_run(numi, turns, tokens, run) for run in range(runs)]
            turns.close()
            logins = [login_run(numi) for _ in range(runs)]
    markdown_note = (
        "p95 idle/loaded per run: "
        + ", ".join(f"{r['idle'] * 1000:.0f}/{r['loaded'] * 1000:.0f}" for r in renders)
        + f" ms; {statistics.median(r['turns'] for r in renders):.0f} turns during "
        f"{statistics.median(r['render_seconds'] for r in renders):.1f} s of renders, "
        f"{statistics.median(r['renders_ok'] for r in renders):.0f} of {RENDERS} rendered"
    )
    login_note = (
        "quiet/during per run: "
        + ", ".join(f"{r['quiet']:.2f}/{r['during']:.2f}" for r in logins)
        + f" s (the slowest of {QUIET_LOGINS} during); "
        f"{statistics.median(r['guesses'] for r in logins):.0f} guesses per run, "
        f"{statistics.median(r['hashed'] for r in logins):.0f} of them hashed"
    )
    return [
        row(
            "fairness",
            f"another user's turn (p95) during {RENDERS} concurrent 'Show as markdown' "
            f"of {LONG_CHARS:,}-character answers",
            [r["loaded"] * 1000 for r in renders],
            "ms",
            "≤ 2× idle",
            note=markdown_note,
            ratio=[r["loaded"] / r["idle"] for r in renders],
        ),
        row(
            "fairness",
            f"a first login (no device cookie) during {LOGIN_CLIENTS} bogus-login loops",
            [r["during"] for r in logins],
            "s",
            "≤ 3 s",
            note=login_note,
            ratio=[r["during"] / r["quiet"] for r in logins],
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    print(table(measure(parser.parse_args().runs)))
