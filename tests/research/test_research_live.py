"""Research runs on a real `numi serve` (SQLite): a page held by the local page server keeps
the run mid-read while the test acts. A reconnecting page gets the progress view whole;
Stop and write writes the report from the pages read; Stop keeps them; after kill -9 or
SIGTERM and a new start the run resumes from its last saved step, fetching no saved page
again, and says so."""

from __future__ import annotations

import json
import signal

import pytest

from numi.testing import Scenario
from research_support import search_on_server
from turn_support import Api, Socket, db_rows, make_chat, of_type, turn_server_env, wait_until
from server_wait import WAIT_SECONDS

PLAN = "1. otters sleep\n2. otters rafts"


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_SHUTDOWN_GRACE_SECONDS=1))
    yield started
    started.stop()


@pytest.fixture
def chat(server, scripted, research_web):
    search_on_server(server, research_web.url)
    return make_chat(Api(server.url, token=server.token), scripted)


def start(server, chat_id: str, research_web, scripted) -> Socket:
    """A research send whose second page is held: returns once the first page is saved."""
    research_web.held.add("otters-2")
    scripted.enqueue(Scenario().text(PLAN))
    socket = Socket(server, chat_id)
    socket.send(type="send", message="How do otters sleep?", mode="research", request_id="r1")
    wait_until(research_web.fetching.is_set, what="the held page to be fetched")
    wait_until(lambda: saved_pages(server, chat_id) == ["otters-1"], what="the first page saved")
    return socket


def saved_pages(server, chat_id: str) -> list[str]:
    rows = db_rows(
        server,
        "SELECT s.url FROM research_sources s JOIN research_runs r ON r.id = s.run_id "
        "WHERE r.chat_id = ? ORDER BY s.id",
        chat_id,
    )
    return [url.rsplit("/", 1)[-1] for (url,) in rows]


def answers(server, chat_id: str) -> list[str]:
    rows = db_rows(
        server,
        "SELECT content FROM messages WHERE chat_id = ? AND role = 'assistant' ORDER BY id",
        chat_id,
    )
    return [content for (content,) in rows]


def test_a_reloaded_page_gets_the_progress_view_whole_and_stop_and_write_writes_the_report(
    server, chat, research_web, scripted
):
    sender = start(server, chat["id"], research_web, scripted)
    page = Socket(server, chat["id"], html=True)  # a page opened mid-run: a snapshot
    try:
        page.send(type="resume", last_event_id=None)
        html = page.receive()
        while "research-progress" not in html:
            html = page.receive()
        assert 'class="research-progress"' in html and "otters sleep" in html
        assert "Page otters-1 &lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold" not in html
        assert "Stop and write" in html and "1 / 12 pages" in html
        scripted.enqueue(Scenario().text("From what was read [1]."))
        sender.send(type="stop", write=True)
        research_web.release.set()
        events = sender.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        sender.close()
        page.close()
    steps = [e["data"]["kind"] for e in of_type(events, "research_step")]
    assert "stop_write" in steps and steps[-1] == "done"
    assert "otters rafts" not in research_web.searches  # the second search never ran
    assert answers(server, chat["id"]) == ["From what was read [1]."]


def test_stop_ends_the_run_and_keeps_what_was_read(server, chat, research_web, scripted):
    sender = start(server, chat["id"], research_web, scripted)
    try:
        sender.send(type="stop")
        events = sender.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        research_web.release.set()
        sender.close()
    assert of_type(events, "error")[-1]["data"]["code"] == "cancelled"
    [kept] = answers(server, chat["id"])
    assert kept.startswith("Research stopped before the report. Pages read (1):")
    assert db_rows(server, "SELECT status FROM research_runs WHERE chat_id = ?", chat["id"]) == [
        ("stopped",)
    ]


@pytest.mark.parametrize("how", ["kill", "sigterm"])
def test_after_a_restart_the_run_resumes_from_its_last_saved_step(
    server, chat, research_web, scripted, how
):
    sender = start(server, chat["id"], research_web, scripted)
    sender.close()
    if how == "kill":
        server.kill()
    else:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
    research_web.release.set()
    scripted.enqueue(Scenario().text("Resumed report [1] [2]."))
    server.restart()
    wait_until(
        lambda: answers(server, chat["id"]) == ["Resumed report [1] [2]."],
        what="the resumed run's report",
    )
    # The saved page was fetched once; the one in flight when the process stopped, again.
    assert research_web.fetches["otters-1"] == 1 and research_web.fetches["otters-2"] == 2
    assert research_web.searches == ["otters sleep", "otters rafts"]  # each search ran once
    assert saved_pages(server, chat["id"]) == ["otters-1", "otters-2"]
    [(state, resumes)] = db_rows(
        server, "SELECT state_json, resumes FROM research_runs WHERE chat_id = ?", chat["id"]
    )
    assert resumes == 1
    assert any("Resumed after a restart" in line["text"] for line in json.loads(state)["log"])


def test_links_queued_before_a_crash_are_read_after_the_restart(
    server, chat, research_web, scripted
):
    research_web.links["otters-1"] = ["/page/lead-1"]
    research_web.held.add("lead-1")
    start(server, chat["id"], research_web, scripted).close()
    wait_until(lambda: research_web.fetches["lead-1"] == 1, what="the link to be fetched")
    server.kill()
    research_web.release.set()
    scripted.enqueue(Scenario().text("Resumed report [1] [2] [3]."))
    server.restart()
    wait_until(
        lambda: answers(server, chat["id"]) == ["Resumed report [1] [2] [3]."],
        what="the resumed run's report",
    )
    # The queued link, in flight at the crash, is read once more; otters-1 never again, and
    # its links are not queued twice.
    assert research_web.fetches["lead-1"] == 2 and research_web.fetches["otters-1"] == 1
    assert sorted(saved_pages(server, chat["id"])) == ["lead-1", "otters-1", "otters-2"]
    [(state,)] = db_rows(
        server, "SELECT state_json FROM research_runs WHERE chat_id = ?", chat["id"]
    )
    assert [lead["url"].rsplit("/", 1)[-1] for lead in json.loads(state)["leads"]] == ["lead-1"]
