"""Edits, deletes, forks and the outline against the database (both backends): what is
removed, what stays paired, and that a failed check changes nothing."""

from __future__ import annotations


from numi.extensions import db
from numi.models import Attachment, Chat, Checkpoint, Message


def attachment(app, user_id: int, name: str) -> int:
    """An uploaded file: the row and its bytes on disk (edits check both)."""
    from numi.chat.attachments import file_path

    with app.app_context():
        row = Attachment(
            user_id=user_id,
            filename=name,
            mime="text/plain",
            size=1,
            sha256=(name * 64)[:64],
            storage_path=f"uploads/{user_id}/{name}",
        )
        db.session.add(row)
        db.session.commit()
        path = file_path(app.config["NUMI_DATA_DIR"], row)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        return row.id


CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
    {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
]


def tool_chat(rows, user_id):
    """Question, a tool step with two results, the answer, a second question and answer."""
    return rows(
        user_id,
        [
            ("user", "Weather and time in Paris?"),
            ("assistant", "", {"tool_calls": CALLS}),
            ("tool", "sunny", {"tool_call_id": "call_1"}),
            ("tool", "12:00", {"tool_call_id": "call_2"}),
            ("assistant", "Sunny, noon."),
            ("user", "Thanks. And Rome?"),
            ("assistant", "Rome is sunny too."),
        ],
    )


def paired(app, chat_id):
    """Every live tool call has a live result and every live result a live call."""
    from sqlalchemy import select

    with app.app_context():
        messages = list(
            db.session.execute(
                select(Message).where(Message.chat_id == chat_id, Message.deleted_at.is_(None))
            ).scalars()
        )
        calls = {c["id"] for m in messages for c in m.tool_calls}
        results = {m.tool_call_id for m in messages if m.role == "tool"}
        return calls == results


def test_deleting_a_tool_step_deletes_its_results(multi_app, users, client_a, rows, live):
    chat_id, ids = tool_chat(rows, users["a"].id)
    response = client_a.delete(f"/api/session/{chat_id}/messages/{ids[1]}")
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["deleted"] == ids[1:4]
    assert [r[0] for r in live(chat_id)] == [ids[0], ids[4], ids[5], ids[6]]
    assert paired(multi_app, chat_id)


def test_deleting_a_tool_result_deletes_the_whole_step(multi_app, users, client_a, rows, live):
    chat_id, ids = tool_chat(rows, users["a"].id)
    assert (
        client_a.delete(f"/api/session/{chat_id}/messages/{ids[3]}").get_json()["deleted"]
        == ids[1:4]
    )
    assert paired(multi_app, chat_id)
    assert "sunny" not in [r[2] for r in live(chat_id)]


def test_deleting_a_plain_message_and_a_whole_turn(multi_app, users, client_a, rows, live):
    chat_id, ids = tool_chat(rows, users["a"].id)
    assert client_a.delete(f"/api/session/{chat_id}/messages/{ids[6]}").get_json()["deleted"] == [
        ids[6]
    ]
    # A turn from one of its middle messages: the question and everything to the next one.
    assert (
        client_a.delete(f"/api/session/{chat_id}/messages/{ids[2]}?scope=turn").get_json()[
            "deleted"
        ]
        == ids[:5]
    )
    assert [r[0] for r in live(chat_id)] == [ids[5]]
    assert paired(multi_app, chat_id)
    # Deleted is deleted: a second delete of the same id is a 404, and bad scopes are refused.
    assert client_a.delete(f"/api/session/{chat_id}/messages/{ids[6]}").status_code == 404
    response = client_a.delete(f"/api/session/{chat_id}/messages/{ids[5]}?scope=everything")
    assert response.status_code == 400 and [r[0] for r in live(chat_id)] == [ids[5]]


def test_htmx_delete_answers_with_the_refreshed_transcript(multi_app, users, client_a, rows):
    chat_id, ids = tool_chat(rows, users["a"].id)
    response = client_a.post(
        f"/c/{chat_id}/messages/{ids[5]}/delete?scope=turn", headers={"HX-Request": "true"}
    )
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert f'id="msg-{ids[4]}"' in html and f'id="msg-{ids[5]}"' not in html and "Rome" not in html


def test_edit_replaces_the_question_and_what_follows_with_a_new_version(
    multi_app, users, client_a, rows, live
):
    chat_id, ids = tool_chat(rows, users["a"].id)
    with multi_app.app_context():
        db.session.add(
            Checkpoint(chat_id=chat_id, summary="old summary", through_message_id=ids[6])
        )
        db.session.add(
            Checkpoint(chat_id=chat_id, summary="early summary", through_message_id=ids[0])
        )
        db.session.commit()
    # No endpoint configured: the edit is saved, the turn then reports the missing model.
    response = client_a.post(
        f"/api/session/{chat_id}/messages/{ids[5]}/edit", json={"text": "And Madrid?"}
    )
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["message"]["content"] == "And Madrid?" and body["message"]["request_id"]
    edited = body["message"]["id"]
    assert [r[:3] for r in live(chat_id)][-1] == (edited, "user", "And Madrid?")
    assert [r[0] for r in live(chat_id)] == [
        *ids[:5],
        edited,
    ]  # the old question and answer are a version
    with multi_app.app_context():
        from numi.chat.context import ChatContextService

        context = ChatContextService(chat_id, users["a"].id, max_messages=100, max_chars=100_000)
        # The summary through the replaced answer does not apply while that version is hidden.
        assert context.latest_checkpoint().summary == "early summary"
        assert ids[6] not in [m.get("_db_id") for m in context.history().messages]


def test_only_questions_can_be_edited_and_not_empty(multi_app, users, client_a, rows, live):
    chat_id, ids = tool_chat(rows, users["a"].id)
    before = live(chat_id)
    assert (
        client_a.post(
            f"/api/session/{chat_id}/messages/{ids[4]}/edit", json={"text": "x"}
        ).get_json()["error"]["code"]
        == "not_editable"
    )
    assert (
        client_a.post(
            f"/api/session/{chat_id}/messages/{ids[0]}/edit", json={"text": "  "}
        ).get_json()["error"]["code"]
        == "empty_message"
    )
    assert (
        client_a.post(
            f"/api/session/{chat_id}/messages/{ids[0]}/edit", json={"text": 5}
        ).status_code
        == 400
    )
    assert live(chat_id) == before


def test_attachment_check_happens_before_anything_is_deleted(
    multi_app, users, client_a, rows, live
):
    mine_id, theirs_id = (
        attachment(multi_app, users["a"].id, "a"),
        attachment(multi_app, users["b"].id, "b"),
    )
    chat_id, ids = tool_chat(rows, users["a"].id)
    before = live(chat_id)
    for attachments, code in (
        ([theirs_id], "attachment_missing"),
        ([mine_id, 999999], "attachment_missing"),
        (["x"], "invalid_input"),
        ([mine_id] * 21, "invalid_input"),
    ):
        response = client_a.post(
            f"/api/session/{chat_id}/messages/{ids[0]}/edit",
            json={"text": "changed", "attachments": attachments},
        )
        assert response.get_json()["error"]["code"] == code, attachments
        assert live(chat_id) == before, "a failed attachment check changed the transcript"
    response = client_a.post(
        f"/api/session/{chat_id}/messages/{ids[5]}/edit",
        json={"text": "With my file", "attachments": [mine_id]},
    )
    assert response.status_code == 202
    with multi_app.app_context():
        edited = db.session.get(Message, response.get_json()["message"]["id"])
        assert edited.content_parts == [{"type": "attachment", "id": mine_id}]


def test_fork_copies_the_transcript_up_to_the_message(multi_app, users, client_a, rows, live):
    file_id = attachment(multi_app, users["a"].id, "c")
    chat_id, ids = rows(
        users["a"].id,
        [
            (
                "user",
                "Look at this",
                {"content_parts": [{"type": "attachment", "id": file_id}], "request_id": "r1"},
            ),
            ("assistant", "", {"tool_calls": CALLS}),
            ("tool", "sunny", {"tool_call_id": "call_1"}),
            ("tool", "12:00", {"tool_call_id": "call_2"}),
            ("assistant", "A cat."),
            ("user", "Later question"),
        ],
        title="Original",
    )
    # Forking at the tool step takes its results along: the fork starts consistent.
    response = client_a.post(f"/api/session/{chat_id}/messages/{ids[1]}/fork")
    assert response.status_code == 201
    fork = response.get_json()
    assert fork["title"] == "Original (fork)" and fork["id"] != chat_id
    copied = live(fork["id"])
    assert [(r[1], r[2], r[3]) for r in copied] == [
        ("user", "Look at this", None),
        ("assistant", "", None),
        ("tool", "sunny", "call_1"),
        ("tool", "12:00", "call_2"),
    ]
    assert paired(multi_app, fork["id"])
    with multi_app.app_context():
        first = db.session.get(Message, copied[0][0])
        # Shared by reference: the same attachment row, no copy; request ids stay with the original.
        assert (
            first.content_parts == [{"type": "attachment", "id": file_id}]
            and first.request_id is None
        )
        assert db.session.query(Attachment).count() == 1
        assert db.session.get(Chat, fork["id"]).user_id == users["a"].id
    assert len(live(chat_id)) == 6  # the original is untouched
    # The HTML route sends the page to the new chat.
    response = client_a.post(f"/c/{chat_id}/messages/{ids[4]}/fork", headers={"HX-Request": "true"})
    assert response.status_code == 204 and response.headers["HX-Location"].startswith("/c/")


def test_topics_outline_lists_each_question_first_line(multi_app, users, client_a, rows):
    chat_id, ids = rows(
        users["a"].id,
        [
            ("user", "\n  Plan a trip <b>to</b> Rome  \nwith details"),
            ("assistant", "Sure."),
            ("user", "x" * 500),
            ("user", "deleted later"),
        ],
    )
    client_a.delete(f"/api/session/{chat_id}/messages/{ids[3]}")
    topics = client_a.get(f"/api/session/{chat_id}/topics").get_json()["topics"]
    assert [t["message_id"] for t in topics] == [ids[0], ids[2]]
    assert topics[0]["title"] == "Plan a trip <b>to</b> Rome"
    assert len(topics[1]["title"]) <= 120 and topics[1]["title"].endswith("…")
    html = client_a.get(f"/c/{chat_id}/topics", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    assert "Plan a trip &lt;b&gt;to&lt;/b&gt; Rome" in html and f"#msg-{ids[0]}" in html


def test_no_change_while_a_turn_runs(server, api, scripted, sockets):
    # A real turn on the live server, held by a provider that stalls mid-answer.
    from numi.testing import Scenario
    from turn_support import make_chat

    chat = make_chat(api, scripted)
    ws = sockets(chat["id"])
    ws.send(type="send", message="first question")
    ws.events_until("turn_end")
    ids = [m["id"] for m in api.history(chat["id"])]
    scripted.enqueue(Scenario().text("still writing", chunks=1).stall())
    ws.send(type="send", message="second question")
    ws.events_until("content")
    try:
        before = api.history(chat["id"])
        attempts = [
            api.post(f"/api/session/{chat['id']}/messages/{ids[0]}/edit", {"text": "new"}),
            api.post(f"/api/session/{chat['id']}/regenerate", {}),
            api.call("DELETE", f"/api/session/{chat['id']}/messages/{ids[1]}"),
        ]
        for status, body in attempts:
            assert status == 409 and body["error"]["code"] == "turn_running"
        assert api.history(chat["id"]) == before
    finally:
        scripted.release()
    ws.events_until("turn_end")
