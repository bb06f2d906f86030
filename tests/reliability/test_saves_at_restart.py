"""A restart while a save waits for the database keeps the answer (issue 35 items 1, 5, 6).

An operator restarts Numi (SIGTERM, `numi serve` or gunicorn's graceful stop) while an
answer's save waits for a SQLite lock or a stopped PostgreSQL: the save goes to the
recovery file at once, the client is told `save_deferred` (never a server path), and the
next start writes it back; under gunicorn each worker restores at its start and one of two
writes it. When the disk refuses the recovery file too, the answer waits in memory for room,
or, stopped meanwhile, the user is told it is only in the log.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest
from saves_support import FIRST, REST, SECRET, postgres_stopped, sqlite_lock, start_answer

from numi.testing import Scenario

from turn_support import (
    Gunicorn,
    Socket,
    db_rows,
    make_chat,
    of_type,
    turn_server_env,
    types,
    wait_until,
)


# --- numi serve ----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["sqlite_locked", "postgres_down"])
def test_sigterm_while_a_save_waits_keeps_the_answer_and_the_next_start_restores_it(
    fault, request, live_server_factory, scripted
):
    """An operator restarts Numi during the outage: the waiting save goes to the recovery
    file at once (not after the shutdown grace), the client is told `save_deferred`, and
    the next start writes the answer back."""
    from turn_support import Api

    env = {"NUMI_SAVE_RETRY_SECONDS": 300, "NUMI_SHUTDOWN_GRACE_SECONDS": 120}
    if fault == "postgres_down":
        cluster = request.getfixturevalue("private_postgres")
        env.update(NUMI_DATABASE_URL=cluster.url(), NUMI_SECRET_KEY=SECRET)
    server = live_server_factory(**turn_server_env(**env))
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, f"sigterm-{fault}")
    with (
        sqlite_lock(server.database_url) if fault == "sqlite_locked" else postgres_stopped(cluster)
    ):
        scripted.release()
        ws.events_until("save_retry", timeout=60)
        server.proc.send_signal(signal.SIGTERM)
        # Within the grace (120 s) only if the waiting save does not wait for it.
        events = ws.events_until("turn_end", timeout=60)
        assert server.proc.wait(60) == 0, server.log()
    ws.close()
    [error] = of_type(events, "error")
    assert error["data"]["code"] == "save_deferred", error
    assert "added to this chat when Numi next starts" in error["data"]["message"]
    [kept] = list((server.data_dir / "recovery").glob("*.json"))
    assert (FIRST + REST) in kept.read_text() and str(kept) in server.log()
    server.start()  # the database is back: the answer goes to its chat
    assert not kept.exists()
    assert [(m["role"], m["content"]) for m in api.history(chat["id"])] == [
        ("user", "Tell me"),
        ("assistant", FIRST + REST),
    ]
    server.stop()


def test_stop_while_a_save_waits_keeps_the_answer_on_disk_for_the_next_start(
    live_server_factory, scripted
):
    """Stop ends a turn whose save waits (the retry loop honours it) without dropping the
    finished answer: it goes to the recovery file, as on SIGTERM."""
    from turn_support import Api

    server = live_server_factory(**turn_server_env(NUMI_SAVE_RETRY_SECONDS=300))
    api = Api(server.url, token=server.token)
    chat, ws = start_answer(server, api, scripted, "stop-locked")
    with sqlite_lock(server.database_url):
        scripted.release()
        ws.events_until("save_retry", timeout=60)
        ws.send(type="stop")
        events = ws.events_until("turn_end", timeout=60)
    ws.close()
    assert [e["data"]["code"] for e in of_type(events, "error")] == ["save_deferred"]
    server.restart()
    assert api.history(chat["id"])[-1]["content"] == FIRST + REST
    server.stop()


def test_sigterm_while_the_lanes_of_a_compare_turn_wait_keeps_every_lanes_answer(
    live_server_factory, scripted
):
    """The lanes of a compare turn share its turn id; each kept its answer in the file
    named by it, so the last lane's overwrote the others'."""
    from turn_support import Api

    server = live_server_factory(
        **turn_server_env(NUMI_SAVE_RETRY_SECONDS=300, NUMI_SHUTDOWN_GRACE_SECONDS=120)
    )
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted)
    answers = {"model-a": "Alpha is kept.", "model-b": "Bravo is kept too."}
    for model, text in answers.items():
        scripted.enqueue(Scenario().text("Start. ", chunks=1).stall().text(text), model=model)
    ws = Socket(server, chat["id"])
    compare = [{"endpoint_id": chat["endpoint"]["id"], "model": model} for model in answers]
    ws.send(type="send", message="Both of you", request_id="lanes-locked", compare=compare)
    events: list[dict] = []

    def lanes_with(kind: str) -> set:
        return {e["data"].get("lane") for e in of_type(events, kind)}

    while lanes_with("content") != {0, 1}:
        events.append(ws.receive(timeout=60))
    with sqlite_lock(server.database_url):
        scripted.release()
        while lanes_with("save_retry") != {0, 1}:
            events.append(ws.receive(timeout=60))
        server.proc.send_signal(signal.SIGTERM)
        events += ws.events_until("turn_end", timeout=60)
        assert server.proc.wait(60) == 0, server.log()
    ws.close()
    assert [e["data"]["code"] for e in of_type(events, "error")] == ["save_deferred"] * 2
    assert len(list((server.data_dir / "recovery").glob("*.json"))) == 2
    server.start()
    saved = db_rows(
        server,
        "SELECT content FROM messages WHERE chat_id = ? AND role = 'assistant'",
        chat["id"],
    )
    assert sorted(content for (content,) in saved) == sorted(
        "Start. " + text for text in answers.values()
    )
    server.stop()


# --- gunicorn: the same restart, and the answer written back by one of two workers ---------


def test_gunicorn_sigterm_while_a_save_waits_and_one_of_two_workers_writes_it_back(
    tmp_path, database_templates, scripted
):
    from turn_support import Api

    if shutil.which("gunicorn", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("gunicorn is not installed (pip install -e '.[gunicorn]')")
    data_dir = tmp_path / "data"
    database_templates.sqlite_copy(data_dir / "numi.db")
    database_url = f"sqlite:///{data_dir / 'numi.db'}"
    server = Gunicorn(data_dir, 1, NUMI_SAVE_RETRY_SECONDS=300, NUMI_SHUTDOWN_GRACE_SECONDS=120)
    try:
        api = Api(server.url)
        chat, ws = start_answer(server, api, scripted, "gunicorn-locked")
        with sqlite_lock(database_url):
            scripted.release()
            ws.events_until("save_retry", timeout=60)
            server.proc.send_signal(signal.SIGTERM)  # the master: gunicorn's graceful stop
            events = ws.events_until("turn_end", timeout=60)
            assert server.proc.wait(60) == 0, server.log()
        ws.close()
    finally:
        server.stop()
    [error] = of_type(events, "error")
    assert error["data"]["code"] == "save_deferred", error
    assert str(data_dir) not in error["data"]["message"]
    [kept] = list((data_dir / "recovery").glob("*.json"))
    # Two workers start at once; each tries to write the kept answer back at its start.
    server = Gunicorn(data_dir, 2)
    try:
        api = Api(server.url)
        assert not kept.exists(), server.log()
        assert [(m["role"], m["content"]) for m in api.history(chat["id"])] == [
            ("user", "Tell me"),
            ("assistant", FIRST + REST),
        ]
    finally:
        server.stop()


# --- no room for the recovery file either (issue 35) ---------------------------------------

NO_ROOM = "".join(f"line {i} of an answer longer than the free space\n" for i in range(20_000))


def _answer_on_a_full_disk(small_disk, live_server_factory, database_templates, scripted):
    """A server whose database and data directory are on `small_disk`, and an answer that
    ends once the disk is full, waiting past NUMI_SAVE_RETRY_SECONDS (1 s) until the
    recovery file has been refused too: returns (server, api, chat, socket)."""
    from turn_support import Api

    database = small_disk.path / "numi.db"
    database_templates.sqlite_copy(database)
    server = live_server_factory(
        **turn_server_env(
            NUMI_DATABASE_URL=f"sqlite:///{database}",
            NUMI_DATA_DIR=small_disk.path / "data",
            NUMI_SAVE_RETRY_SECONDS=1,
        )
    )
    api = Api(server.url, token=server.token)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Start. ", chunks=1).stall().text(NO_ROOM, chunks=50))
    ws = Socket(server, chat["id"])
    ws.send(type="send", message="Write a lot", request_id="no-room")
    ws.events_until("content", timeout=60)
    small_disk.fill()
    scripted.release()
    ws.events_until("save_retry", timeout=60)
    wait_until(
        lambda: "kept on disk either" in server.log_path.read_text(errors="replace"),
        timeout=60,
        what="the recovery file to be refused",
    )
    return server, api, chat, ws


def test_no_room_for_the_recovery_file_either_the_answer_waits_in_memory_for_room(
    small_disk, live_server_factory, database_templates, scripted
):
    server, api, chat, ws = _answer_on_a_full_disk(
        small_disk, live_server_factory, database_templates, scripted
    )
    try:
        small_disk.free()  # room again: the turn, still holding the answer, saves it
        rest = ws.events_until("turn_end", timeout=60)
        ws.close()
        assert "done" in types(rest) and "error" not in types(rest), of_type(rest, "error")
        assert api.history(chat["id"])[-1]["content"] == "Start. " + NO_ROOM
    finally:
        server.stop()  # before the disk is unmounted


def test_no_room_and_a_restart_the_user_is_told_the_answer_is_only_in_the_log(
    small_disk, live_server_factory, database_templates, scripted
):
    server, api, chat, ws = _answer_on_a_full_disk(
        small_disk, live_server_factory, database_templates, scripted
    )
    try:
        server.proc.send_signal(signal.SIGTERM)
        events = ws.events_until("turn_end", timeout=60)
        assert server.proc.wait(60) == 0, server.log()
    finally:
        small_disk.free()
        server.stop()  # before the disk is unmounted
    ws.close()
    [error] = of_type(events, "error")
    assert error["data"]["code"] == "save_lost", error
    assert "could not be kept" in error["data"]["message"]
    assert "operator can recover it from the server log" in error["data"]["message"]
    assert "next starts" not in error["data"]["message"]  # no promise it comes back
    assert NO_ROOM in server.log_path.read_text(errors="replace").replace("\\n", "\n")
