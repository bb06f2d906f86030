"""A finished answer survives a database that cannot take it (issue 20 item 2).

Real faults, each made by the test: its own PostgreSQL cluster stopped with `pg_ctl stop`
while the answer streams; a SQLite write lock held by another connection; a disk (a tmpfs)
filled to ENOSPC under the SQLite database; and, on PostgreSQL with no fault, an answer
whose distinct words exceed to_tsvector's 1 MB. The turn retries the save and tells its
clients; past NUMI_SAVE_RETRY_SECONDS it keeps the answer in a recovery file that the next
start writes back. Meanwhile a save waiting for a SQLite lock stops no other chat.
"""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import pytest
import simple_websocket
from saves_support import FIRST, REST, SECRET, notices, sqlite_lock, start_answer

from numi.testing import Scenario

from turn_support import Socket, make_chat, of_type, turn_server_env, types
from server_wait import WAIT_SECONDS


# --- PostgreSQL down -----------------------------------------------------------------------


def test_postgres_down_at_the_save_the_answer_waits_and_is_saved_when_it_is_back(
    private_postgres, live_server_factory, scripted
):
    from turn_support import Api

    server = live_server_factory(
        **turn_server_env(
            NUMI_DATABASE_URL=private_postgres.url(),
            NUMI_SECRET_KEY=SECRET,
            NUMI_SAVE_RETRY_SECONDS=300,
        )
    )
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, "pg-down")
    page = Socket(server, chat["id"], html=True)  # the chat page's view of the same turn
    page.send(type="resume", last_message_id=0)
    page.receive(timeout=30)
    private_postgres.stop()
    try:
        scripted.release()  # the answer ends while the database is down
        waiting = ws.events_until("save_retry", timeout=60)
        notice = "Saving… the database is unavailable"
        while notice not in page.receive(timeout=30):
            pass  # the page shows it as a notice in the turn
        assert (
            notices(waiting) == [{"saved": False, "message": notices(waiting)[0]["message"]}]
            and "Saving… the database is unavailable" in notices(waiting)[0]["message"]
        )
    finally:
        private_postgres.start()
    rest = ws.events_until("turn_end", timeout=60)
    ws.close()
    page.close()
    assert "done" in types(rest) and "error" not in types(rest), types(rest)
    assert {"saved": True, "message": "Saved."} in notices(rest)
    [answer] = [m for m in api.history(chat["id"]) if m["role"] == "assistant"]
    assert answer["content"] == FIRST + REST
    assert of_type(rest, "done")[0]["data"]["message_id"] == answer["id"]
    # A send while the database is down: a clear 503, nothing half-done.
    private_postgres.stop()
    try:
        status, body = api.post("/api/chat_stream", {"session": chat["id"], "message": "Anyone?"})
        assert (status, body["error"]["code"]) == (503, "storage_unavailable"), body
        with pytest.raises(simple_websocket.ConnectionError, match="503"):
            Socket(server, chat["id"])
    finally:
        private_postgres.start()
    assert "Traceback" not in server.log()
    server.stop()


def test_postgres_down_past_the_bound_the_answer_is_kept_on_disk_and_written_back(
    private_postgres, live_server_factory, scripted
):
    from turn_support import Api

    server = live_server_factory(
        **turn_server_env(
            NUMI_DATABASE_URL=private_postgres.url(),
            NUMI_SECRET_KEY=SECRET,
            NUMI_SAVE_RETRY_SECONDS=1,
        )
    )
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, "pg-gone")
    private_postgres.stop()
    try:
        scripted.release()
        events = ws.events_until("turn_end", timeout=60)
        ws.close()
        [error] = of_type(events, "error")
        assert error["data"]["code"] == "save_deferred", error
        [kept] = list((server.data_dir / "recovery").glob("*.json"))
        # The user is told it comes back, never a server path: the operator's log has it.
        assert "added to this chat when Numi next starts" in error["data"]["message"]
        assert str(server.data_dir) not in error["data"]["message"]
        assert str(kept) in server.log()
        assert (FIRST + REST) in kept.read_text()
    finally:
        private_postgres.start()
    server.restart()  # the next start writes it back
    assert not kept.exists()
    history = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Tell me"),
        ("assistant", FIRST + REST),
    ]
    assert history[1]["parent_id"] == history[0]["id"]
    server.stop()


def test_postgres_takes_an_answer_of_30000_distinct_hashes_and_finds_its_first_words(
    private_postgres, live_server_factory, scripted
):
    """to_tsvector refused it ("string is too long for tsvector"): the index now covers
    each message's first 100,000 characters."""
    from turn_support import Api

    server = live_server_factory(
        **turn_server_env(NUMI_DATABASE_URL=private_postgres.url(), NUMI_SECRET_KEY=SECRET)
    )
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted)
    hashes = " ".join(hashlib.sha1(str(i).encode()).hexdigest() for i in range(30_000))
    answer = "zebracorn " + hashes
    scripted.enqueue(Scenario().text(answer, chunks=200))
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="Hashes please", request_id="hashes")
    events = ws.events_until("turn_end", timeout=120)
    ws.close()
    assert "done" in types(events) and "error" not in types(events), of_type(events, "error")
    assert api.history(chat["id"])[-1]["content"] == answer
    status, found = api.get("/api/search?q=zebracorn")
    assert status == 200 and [m["chat_id"] for m in found["messages"]] == [chat["id"]]
    server.stop()


# --- SQLite locked, disk full --------------------------------------------------------------


def test_sqlite_locked_past_its_busy_timeout_the_answer_is_saved_when_the_lock_goes(
    live_server_factory, scripted
):
    from turn_support import Api

    server = live_server_factory(**turn_server_env(NUMI_SAVE_RETRY_SECONDS=300))
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, "sqlite-locked")
    with sqlite_lock(server.database_url):
        scripted.release()
        # The save waits briefly for the lock, fails "database is locked", retries.
        waiting = ws.events_until("save_retry", timeout=60)
        assert not notices(waiting)[0]["saved"]
    rest = ws.events_until("turn_end", timeout=60)
    ws.close()
    assert "done" in types(rest) and "error" not in types(rest), types(rest)
    assert api.history(chat["id"])[-1]["content"] == FIRST + REST
    server.stop()


def test_a_full_disk_under_sqlite_the_answer_is_saved_once_there_is_room(
    small_disk, live_server_factory, database_templates, scripted
):
    from turn_support import Api

    database = small_disk.path / "numi.db"
    database_templates.sqlite_copy(database)
    server = live_server_factory(
        **turn_server_env(NUMI_DATABASE_URL=f"sqlite:///{database}", NUMI_SAVE_RETRY_SECONDS=300)
    )
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted)
    big = "".join(f"line {i} of an answer longer than the free space\n" for i in range(20_000))
    scripted.enqueue(Scenario().text("Start. ", chunks=1).stall().text(big, chunks=50))
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="Write a lot", request_id="disk-full")
    ws.events_until("content", timeout=60)
    small_disk.fill()
    try:
        with pytest.raises(OSError):  # the disk is full for real
            (small_disk.path / "probe").write_bytes(b"x" * 8192)
        scripted.release()
        waiting = ws.events_until("save_retry", timeout=60)
        assert not notices(waiting)[0]["saved"]
    finally:
        small_disk.free()
    rest = ws.events_until("turn_end", timeout=60)
    ws.close()
    assert "done" in types(rest) and "error" not in types(rest), types(rest)
    assert api.history(chat["id"])[-1]["content"] == "Start. " + big
    server.stop()
    assert Path(database).exists()


def test_a_save_waiting_for_a_sqlite_lock_stops_no_other_chat(live_server_factory, scripted):
    """SQLite waits for a lock inside the C library, where gevent cannot switch: a save
    that waited there (10 s per try) froze every stream and request of the process. The
    waits below are bounds far under that 10 s, not speed targets (bench/locked.py)."""
    from turn_support import Api

    server = live_server_factory(**turn_server_env(NUMI_SAVE_RETRY_SECONDS=300))
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, "locked-saver")
    other = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("tick " * 200, chunks=200).delay(0.05))
    streaming = Socket(server, other["id"])
    streaming.send(type="send", message="Keep talking", request_id="other-chat")
    streaming.events_until("content", timeout=60)
    with sqlite_lock(server.database_url):
        scripted.release()
        ws.events_until("save_retry", timeout=60)
        # The save now retries while the lock is held; the other chat streams on...
        for _ in range(40):
            assert streaming.events_until("content", timeout=WAIT_SECONDS)
        # ...and /healthz answers, while the lock is still held.
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
            assert response.status == 200
    rest = ws.events_until("turn_end", timeout=60)
    assert "done" in types(rest), types(rest)
    # It has streamed through the lock: stopped, rather than the rest of its 10 s waited out.
    streaming.send(type="stop")
    streaming.events_until("turn_end", timeout=60)
    ws.close()
    streaming.close()
    assert api.history(chat["id"])[-1]["content"] == FIRST + REST
    server.stop()
