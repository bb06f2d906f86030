"""The live Markdown mirror's catch-up (issue 42): how long it takes to write every chat of
a user, and how long the hub goes without running anyone else meanwhile.

An in-process app on SQLite in a temporary folder imports a project export of `--chats`
chats of `--messages` messages each (numi.testing.exports), turns the mirror on and waits
for the whole folder to be written, while a greenlet that asks to run every millisecond
records its longest wait: the hub's longest block during the catch-up (reads and the
files' text on the hub, batch by batch; the writes in the mirror's thread). Then one
chat is renamed, and the time until its file is renamed is the live update's latency
(the delay, NUMI_MIRROR_DELAY_SECONDS, set to 0 here, not counted).

    python bench/mirror.py [--chats 1000] [--messages 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gevent

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from numi import create_app  # noqa: E402
from numi.database import upgrade  # noqa: E402
from numi.services import services  # noqa: E402
from numi.testing import exports  # noqa: E402

TOKEN = "bench-mirror-token"


def wait(condition, what: str, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        gevent.sleep(0.005)


def one_run(chats: int, messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        app = create_app(
            {
                "NUMI_DATA_DIR": str(root / "data"),
                "NUMI_SECRET_KEY": "bench",
                "NUMI_ACCESS_TOKEN": TOKEN,
                "NUMI_AUTO_ENDPOINTS": False,
                "NUMI_IMPORT_MAX_CHATS": chats + 1,
                "NUMI_IMPORT_MAX_MESSAGES": chats * messages + 1,
                "NUMI_MIRROR_DELAY_SECONDS": 0.0,
                "NUMI_MIRROR_MIN_FREE_MB": 0,
            }
        )
        upgrade(app)
        client = app.test_client()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        body = exports.project(chats, messages)
        started = client.post("/api/import", json=body, headers=auth).get_json()["job"]
        job = {"state": "running"}

        def imported() -> bool:
            job.update(client.get(f"/api/imports/{started['id']}", headers=auth).get_json()["job"])
            return job["state"] != "running"

        wait(imported, "the import")
        assert job["state"] == "done", job

        vault = root / "vault"
        longest = [0.0]

        def ticker() -> None:
            last = time.perf_counter()
            while True:
                gevent.sleep(0.001)
                now = time.perf_counter()
                longest[0] = max(longest[0], now - last - 0.001)
                last = now

        keeper = services(app).mirror
        tick = gevent.spawn(ticker)
        begun = time.perf_counter()
        response = client.put("/api/mirror", json={"folder": str(vault)}, headers=auth)
        assert response.status_code == 200, response.get_json()
        wait(lambda: keeper.idle() and len(list(vault.rglob("*.md"))) >= chats, "the catch-up")
        catch_up = time.perf_counter() - begun
        tick.kill()

        chat = client.get("/api/sessions?limit=1", headers=auth).get_json()
        chat_id = (chat.get("sessions") or chat.get("chats") or chat.get("items"))[0]["id"]
        begun = time.perf_counter()
        client.patch(f"/api/session/{chat_id}", json={"title": "Renamed"}, headers=auth)
        wait(lambda: list(vault.rglob(f"Renamed-{chat_id[:8]}.md")), "the rename")
        rename = time.perf_counter() - begun
        keeper.stop()
        return {
            "catch_up_s": catch_up,
            "hub_block_ms": longest[0] * 1000,
            "rename_ms": rename * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(args.chats, args.messages) for _ in range(args.runs)]
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(
        f"mirror catch-up of {args.chats:,} chats × {args.messages} messages "
        f"(median of {args.runs}): {median['catch_up_s']:.2f} s, "
        f"the hub's longest block {median['hub_block_ms']:.1f} ms; "
        f"a rename reaches its file in {median['rename_ms']:.1f} ms"
    )
    print(json.dumps(median))


if __name__ == "__main__":
    main()
