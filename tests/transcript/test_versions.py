"""Answer versions through a live server on SQLite and PostgreSQL, with the scripted provider
answering through the real SDK: regenerate three times, edit once, switch between every
version, reload, export JSON, import it again and find every branch."""

from __future__ import annotations

import urllib.request

import pytest

from import_support import api_imported_chat

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env


@pytest.fixture
def server(live_server_factory, database_url):
    """A live server on this test's backend (a fresh database of `database_url`)."""
    started = live_server_factory(**turn_server_env(NUMI_DATABASE_URL=database_url))
    yield started
    started.kill()


@pytest.fixture
def api(server):
    return Api(server.url)


def wait_turn(server, api, chat_id, action):
    """Run `action()` (which starts a turn) with a socket following the chat; its events."""
    status, body = api.get(f"/api/chat/stream_status/{chat_id}")
    socket = Socket(server, chat_id)
    socket.send(type="resume", last_event_id=body.get("last_event_id") or 0)
    try:
        result = action()
        events = socket.events_until("turn_end")
    finally:
        socket.close()
    assert of_type(events, "done"), events
    return result


def fetch(server, path: str) -> str:
    """A page or a download as text (the server's access token sent along)."""
    request = urllib.request.Request(server.url + path, headers=server.headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def shown(api, chat_id):
    return [(m["role"], m["content"]) for m in api.history(chat_id)]


def switch(api, chat_id, message_id):
    status, body = api.post(f"/api/session/{chat_id}/messages/{message_id}/show")
    assert status == 200, body
    return body


def test_regenerate_edit_switch_export_and_import_every_version(server, api, scripted):
    chat = make_chat(api, scripted)
    chat_id = chat["id"]
    scripted.enqueue(Scenario().text("Answer one."))
    wait_turn(
        server,
        api,
        chat_id,
        lambda: Socket(server, chat_id).send(type="send", message="Name a colour", request_id="q1"),
    )
    question = api.history(chat_id)[0]

    # Regenerate three times: every answer stays, the newest is shown.
    for text in ("Answer two.", "Answer three.", "Answer four."):
        scripted.enqueue(Scenario().text(text))
        wait_turn(server, api, chat_id, lambda: api.post(f"/api/session/{chat_id}/regenerate", {}))
    history = api.history(chat_id)
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Name a colour"),
        ("assistant", "Answer four."),
    ]
    answers = history[1]["version"]["ids"]
    assert history[1]["version"]["n"] == 4 and history[1]["version"]["m"] == 4 and len(answers) == 4
    assert history[0]["version"] is None
    # The model was asked the question alone each time: no earlier answer in its context.
    assert all("Answer" not in str(r.body["messages"]) for r in scripted.requests)

    # Edit the question: a second version of it, answered anew.
    scripted.enqueue(Scenario().text("Blue."))
    status, body = wait_turn(
        server,
        api,
        chat_id,
        lambda: api.post(
            f"/api/session/{chat_id}/messages/{question['id']}/edit", {"text": "Name a cold colour"}
        ),
    )
    assert status == 202, body
    edited = body["message"]["id"]
    assert "Name a colour" not in str(scripted.requests[-1].body["messages"])
    history = api.history(chat_id)
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Name a cold colour"),
        ("assistant", "Blue."),
    ]
    assert history[0]["version"] == {"n": 2, "m": 2, "ids": [question["id"], edited]}

    # Switch between every version; the question's first version brings its last shown answer.
    assert switch(api, chat_id, question["id"])["version"] == {
        "n": 1,
        "m": 2,
        "ids": [question["id"], edited],
    }
    assert shown(api, chat_id) == [("user", "Name a colour"), ("assistant", "Answer four.")]
    for n, (answer_id, text) in enumerate(
        zip(answers, ("Answer one.", "Answer two.", "Answer three.", "Answer four.")), 1
    ):
        assert switch(api, chat_id, answer_id)["version"]["n"] == n
        assert shown(api, chat_id) == [("user", "Name a colour"), ("assistant", text)]
    switch(api, chat_id, answers[1])
    # Saved: a reload (a new page, any tab) shows the chosen version, with its switcher.
    page = fetch(server, f"/c/{chat_id}")
    assert "Answer two." in page and "Answer four." not in page and "Blue." not in page
    assert (
        'aria-label="Previous version"' in page
        and 'aria-label="Next version"' in page
        and "2/4" in page
    )

    # The readable exports follow the shown versions only; the JSON export carries them all.
    markdown = fetch(server, f"/api/session/{chat_id}/export?fmt=md")
    assert "Answer two." in markdown and "Answer one." not in markdown and "Blue." not in markdown
    status, document = api.get(f"/api/session/{chat_id}/export?fmt=json")
    assert status == 200
    contents = sorted(m["content"] for m in document["messages"])
    assert contents == sorted(
        [
            "Name a colour",
            "Answer one.",
            "Answer two.",
            "Answer three.",
            "Answer four.",
            "Name a cold colour",
            "Blue.",
        ]
    )

    # Import it again: the same transcript, every version reachable.
    copy = api_imported_chat(api, document)
    assert shown(api, copy) == [("user", "Name a colour"), ("assistant", "Answer two.")]
    copied = api.history(copy)
    assert copied[1]["version"]["n"] == 2 and copied[1]["version"]["m"] == 4
    found = set()
    for answer_id in copied[1]["version"]["ids"]:
        switch(api, copy, answer_id)
        found.add(shown(api, copy)[1][1])
    switch(api, copy, copied[0]["version"]["ids"][1])
    found.add(shown(api, copy)[1][1])
    assert shown(api, copy)[0] == ("user", "Name a cold colour")
    assert found == {"Answer one.", "Answer two.", "Answer three.", "Answer four.", "Blue."}
    # Exporting the copy gives the same tree (which version is selected aside).
    assert _tree(api.get(f"/api/session/{copy}/export?fmt=json")[1]) == _tree(document)

    # Fork and delete work on a version that is not shown.
    status, fork = api.post(f"/api/session/{chat_id}/messages/{answers[2]}/fork")
    assert status == 201
    assert shown(api, fork["id"]) == [("user", "Name a colour"), ("assistant", "Answer three.")]
    status, _ = api.call("DELETE", f"/api/session/{chat_id}/messages/{answers[2]}")
    assert status == 200
    assert api.history(chat_id)[1]["version"]["ids"] == [answers[0], answers[1], answers[3]]
    assert shown(api, chat_id) == [("user", "Name a colour"), ("assistant", "Answer two.")]


def _tree(document):
    position = {m["id"]: i for i, m in enumerate(document["messages"])}
    return [(m["content"], position.get(m["parent_id"])) for m in document["messages"]]


def test_no_switch_while_a_turn_runs_and_bad_ids(server, api, scripted):
    chat = make_chat(api, scripted)
    chat_id = chat["id"]
    scripted.enqueue(Scenario().text("First."), Scenario().text("Second."))
    wait_turn(
        server,
        api,
        chat_id,
        lambda: Socket(server, chat_id).send(type="send", message="Hi", request_id="h1"),
    )
    wait_turn(server, api, chat_id, lambda: api.post(f"/api/session/{chat_id}/regenerate", {}))
    first, second = api.history(chat_id)[1]["version"]["ids"]

    scripted.enqueue(Scenario().text("slow").stall())
    socket = Socket(server, chat_id)
    socket.send(type="send", message="More", request_id="h2")
    socket.events_until("accepted")
    status, body = api.post(f"/api/session/{chat_id}/messages/{first}/show")
    assert status == 409 and body["error"]["code"] == "turn_running"
    scripted.release()
    socket.events_until("turn_end")
    socket.close()
    assert [m["content"] for m in api.history(chat_id)][:2] == ["Hi", "Second."]
    # Unknown and foreign ids are 404 and change nothing.
    assert api.post(f"/api/session/{chat_id}/messages/999999/show")[0] == 404
    other = make_chat(api, scripted)
    assert api.post(f"/api/session/{other['id']}/messages/{first}/show")[0] == 404
    assert [m["content"] for m in api.history(chat_id)][:2] == ["Hi", "Second."]
