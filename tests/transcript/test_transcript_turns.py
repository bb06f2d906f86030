"""Edit and regenerate through a live server with the scripted provider: the answer
streams over the chat's WebSocket, the model sees the edited transcript only, and the
question is answered without being saved twice."""

from __future__ import annotations

from numi.testing import Scenario
from turn_support import Socket, db_rows, make_chat, of_type


def user_texts(body) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        texts.append(
            content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        )
    return texts


def listen(server, api, chat_id) -> Socket:
    """A socket following the chat from now on, as an open page does (it resumes on connect)."""
    status, body = api.get(f"/api/chat/stream_status/{chat_id}")
    socket = Socket(server, chat_id)
    socket.send(type="resume", last_event_id=body.get("last_event_id") or 0)
    return socket


def send(server, chat_id, text, events_of=None):
    socket = events_of or Socket(server, chat_id)
    socket.send(type="send", message=text, request_id=f"r-{text[:20]}")
    events = socket.events_until("turn_end")
    if events_of is None:
        socket.close()
    return events


def test_edit_then_regenerate_answers_the_edited_question(server, api, scripted):
    chat = make_chat(api, scripted)
    send(server, chat["id"], "What is the capital of Italy?")
    send(server, chat["id"], "And of Spain?")
    history = api.history(chat["id"])
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    first_question, first_answer = history[0], history[1]

    socket = listen(server, api, chat["id"])  # the page's connection: the new answer streams here
    scripted.reset()
    scripted.enqueue(Scenario().text("France's capital is Paris.", chunks=3))
    status, body = api.post(
        f"/api/session/{chat['id']}/messages/{first_question['id']}/edit",
        {"text": "What is the capital of France?"},
    )
    assert status == 202, body
    events = socket.events_until("turn_end")
    assert of_type(events, "done")
    accepted = of_type(events, "accepted")[0]
    edited_id = body["message"]["id"]
    assert edited_id != first_question["id"]  # the edit is a new version of the question
    assert accepted["data"]["message_id"] == edited_id  # answered, not saved again
    socket.close()

    # The model saw the edited question, nothing after it.
    request = scripted.wait_for_requests(1).body
    assert user_texts(request) == ["What is the capital of France?"]
    assert "Spain" not in str(request) and first_answer["content"] not in str(request)

    history = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "What is the capital of France?"),
        ("assistant", "France's capital is Paris."),
    ]
    assert history[0]["id"] == edited_id
    assert history[0]["version"] == {"n": 2, "m": 2, "ids": [first_question["id"], edited_id]}
    # The old rows are an inactive version, nothing is deleted, and the edited question was
    # saved once.
    assert db_rows(
        server, "SELECT count(*) FROM messages WHERE chat_id = ? AND NOT active", chat["id"]
    ) == [(4,)]
    assert db_rows(
        server,
        "SELECT count(*) FROM messages WHERE chat_id = ? AND deleted_at IS NOT NULL",
        chat["id"],
    ) == [(0,)]
    assert db_rows(
        server,
        "SELECT count(*) FROM messages WHERE chat_id = ? AND role = 'user' AND active",
        chat["id"],
    ) == [(1,)]


def test_regenerate_the_last_answer_with_another_model(server, api, scripted):
    chat = make_chat(api, scripted, model="model-one")
    send(server, chat["id"], "Tell me a joke")
    before = api.history(chat["id"])
    scripted.reset()
    scripted.enqueue(Scenario().text("A better joke."), model="model-two")
    socket = listen(server, api, chat["id"])
    status, body = api.post(
        f"/api/session/{chat['id']}/regenerate",
        {"endpoint_id": chat["endpoint"]["id"], "model": "model-two"},
    )
    assert status == 202, body
    socket.events_until("turn_end")
    socket.close()
    assert scripted.wait_for_requests(1).body["model"] == "model-two"
    history = api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Tell me a joke"),
        ("assistant", "A better joke."),
    ]
    assert history[0]["id"] == before[0]["id"] and history[1]["id"] != before[1]["id"]
    assert api.get(f"/api/session/{chat['id']}")[1]["model"] == "model-two"
    # A route the user cannot use is refused before the answer is removed.
    status, body = api.post(
        f"/api/session/{chat['id']}/regenerate", {"endpoint_id": 987654, "model": "x"}
    )
    assert status == 404 and api.history(chat["id"]) == history


def test_edit_while_the_turn_runs_is_refused(server, api, scripted):
    chat = make_chat(api, scripted)
    send(server, chat["id"], "First")
    scripted.reset()
    scripted.enqueue(Scenario().text("slow").stall())
    socket = Socket(server, chat["id"])
    socket.send(type="send", message="Second", request_id="r-second")
    socket.events_until("accepted")
    question = api.history(chat["id"])[0]
    status, body = api.post(
        f"/api/session/{chat['id']}/messages/{question['id']}/edit", {"text": "changed"}
    )
    assert status == 409 and body["error"]["code"] == "turn_running"
    status, body = api.post(f"/api/session/{chat['id']}/regenerate", {})
    assert status == 409 and body["error"]["code"] == "turn_running"
    assert api.history(chat["id"])[0]["content"] == "First"
    scripted.release()
    socket.events_until("turn_end")
    socket.close()
