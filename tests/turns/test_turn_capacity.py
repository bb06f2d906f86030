"""Many open tabs against one live server: resources a connection holds while idle."""

from __future__ import annotations

from numi.testing import Scenario

from turn_support import make_chat, types
from server_wait import WAIT_SECONDS

# More than the database pool lends out at once (5 connections + 10 overflow).
TABS = 20


def test_open_html_tabs_do_not_each_hold_a_database_connection(api, scripted, sockets):
    """Each tab's view reads the saved answer from the database when a turn ends. A tab
    that kept that connection until it closed would leave the 16th tab's stream waiting
    for the pool and failing; every tab here stays open while the next one's turn runs."""
    tabs = []
    for i in range(TABS):
        chat = make_chat(api, scripted)
        ws = sockets(chat["id"], html=True)
        ws.send(type="resume", last_event_id=None, last_message_id=0)
        scripted.enqueue(Scenario().text(f"Answer number {i}."))
        ws.send(type="send", message=f"Question {i}")
        frames = []
        while not any('data-running="0"' in frame for frame in frames):
            frames.append(ws.receive(timeout=20))  # tab {i}
        assert f"Answer number {i}." in "".join(frames), i
        tabs.append(ws)
    assert len(tabs) == TABS


# More chats than redis-py's default connection pool (100): with Redis, each chat a process
# follows holds a connection (its reader's blocking XREAD) while a tab has it open.
FOLLOWED = 110


def test_one_process_follows_more_chats_than_a_default_redis_pool(api, scripted, sockets):
    chats = [make_chat(api, scripted)["id"] for _ in range(FOLLOWED)]
    tabs = []
    for chat_id in chats:
        ws = sockets(chat_id)
        ws.send(type="resume", last_event_id=None, last_message_id=0)
        tabs.append(ws)
    for i in (0, FOLLOWED - 1):  # the first and the last chat followed
        scripted.enqueue(Scenario().text(f"Answer number {i}."))
        tabs[i].send(type="send", message=f"Question {i}")
        events = tabs[i].events_until("turn_end", timeout=WAIT_SECONDS)
        assert "error" not in types(events), events
        assert (
            "".join(e["data"]["delta"] for e in events if e["type"] == "content")
            == f"Answer number {i}."
        )


def test_every_tab_of_a_chat_gets_the_saved_answer(api, scripted, sockets):
    """The saved message is read and rendered once per event for all of a process's tabs
    (numi/web/live/fragments.py); each tab still gets it, placed for its own page."""
    chat = make_chat(api, scripted)
    tabs = [sockets(chat["id"], html=True) for _ in range(3)]
    for ws in tabs:
        ws.send(type="resume", last_event_id=None, last_message_id=0)
    scripted.enqueue(Scenario().text("The **shared** answer.", chunks=3))
    tabs[0].send(type="send", message="Tell all tabs")
    answer_id = None
    for ws in tabs:
        frames = []
        while not any('data-running="0"' in frame for frame in frames):
            frames.append(ws.receive(timeout=20))
        page = "".join(frames)
        saved = [m for m in api.history(chat["id"]) if m["role"] == "assistant"]
        answer_id = saved[-1]["id"]
        assert f'id="msg-{answer_id}"' in page
        assert "<strong>shared</strong>" in page
        assert (
            'hx-swap-oob="beforebegin:#turn-' in page
        )  # before the live part, as the page expects
