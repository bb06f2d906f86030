"""What a finished turn leaves in the process for late reconnects (issue 45): its answer is
saved, so a page that comes back gets it whole, and the in-process channel keeps no deltas."""

from __future__ import annotations

from numi.testing import Scenario

from turn_support import of_type

WORDS = " ".join(f"w{i}" for i in range(30))


def test_a_page_back_after_the_turn_ended_gets_the_saved_answer(
    server, scripted, api, chat, sockets, channel_backend
):
    scripted.enqueue(Scenario().text(WORDS, chunks=30))
    first = sockets(chat["id"])
    first.send(type="send", message="Thirty words")
    events = first.events_until("turn_end")
    first.close()
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == WORDS

    # Back with the id of the first word it saw: everything after it is over and saved.
    back = sockets(chat["id"])
    back.send(type="resume", last_event_id=of_type(events, "content")[0]["event_id"])
    missed = [back.receive()]
    if channel_backend == "memory":
        # One finished snapshot naming the saved answer stands for the turn: its deltas
        # were let go when it ended.
        assert [e["type"] for e in missed] == ["snapshot"]
        assert missed[0]["data"]["finished"] is True
        assert answer["id"] in missed[0]["data"]["saved_message_ids"]
    else:
        # Redis keeps the stream for late reconnects: the rest is replayed exactly.
        missed += back.events_until("turn_end")
        shown = "".join(e["data"]["delta"] for e in of_type(events, "content")[:1] + missed
                        if e["type"] == "content")  # fmt: skip
        assert shown == WORDS

    # Back with the id just before turn_end: the end itself comes again, as it was.
    again = sockets(chat["id"])
    again.send(type="resume", last_event_id=events[-1]["event_id"] - 1)
    assert again.receive() == events[-1]
