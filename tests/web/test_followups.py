"""Queued follow-ups over HTTP on each backend: list, edit, remove, clear, limits, and the
page's forms. (Queueing during a running turn and the queue running after it are in
tests/turns/test_turn_queue.py, against a live server.)"""

from __future__ import annotations

import pytest

from numi.chat import followups
from numi.extensions import db
from numi.models import QueuedMessage


@pytest.fixture
def chat_id(client):
    response = client.post("/api/session", json={"title": "queue"})
    assert response.status_code == 201
    return response.get_json()["id"]


def queue_up(app, chat_id, *texts):
    """Items as a send with queue:true leaves them (the domain function it calls)."""
    with app.app_context():
        user_id = db.session.execute(
            db.text("SELECT user_id FROM chats WHERE id = :id"), {"id": chat_id}
        ).scalar_one()
        ids = [
            followups.add(
                user_id,
                chat_id,
                message=text,
                attachments=[],
                request_id=f"r-{n}-{text[:20]}",
                timezone=None,
                tz_offset=None,
            ).id
            for n, text in enumerate(texts)
        ]
        db.session.remove()
        return ids


def saved(app, chat_id):
    with app.app_context():
        rows = (
            db.session.query(QueuedMessage)
            .filter_by(chat_id=chat_id)
            .order_by(QueuedMessage.id)
            .all()
        )
        texts = [row.content for row in rows]
        db.session.remove()
        return texts


def test_list_edit_remove_and_clear(app, client, chat_id):
    first, second, third = queue_up(app, chat_id, "one", "two", "three")
    body = client.get(f"/api/session/{chat_id}/queue").get_json()
    # Nothing runs: the queue is paused until resumed or a new send.
    assert [i["message"] for i in body["items"]] == ["one", "two", "three"] and body[
        "paused"
    ] is True
    response = client.patch(f"/api/session/{chat_id}/queue/{first}", json={"message": "ONE"})
    assert response.status_code == 200 and response.get_json()["item"]["message"] == "ONE"
    for bad, code in (
        (" ", "empty_message"),
        ("x" * (app.config["NUMI_MAX_MESSAGE_CHARS"] + 1), "too_long"),
        (5, "empty_message"),
    ):
        response = client.patch(f"/api/session/{chat_id}/queue/{second}", json={"message": bad})
        assert response.status_code == 400 and response.get_json()["error"]["code"] == code
    response = client.delete(f"/api/session/{chat_id}/queue/{second}")
    assert response.status_code == 200 and [i["id"] for i in response.get_json()["items"]] == [
        first,
        third,
    ]
    assert client.delete(f"/api/session/{chat_id}/queue/{second}").status_code == 404
    assert (
        client.patch(f"/api/session/{chat_id}/queue/999999", json={"message": "x"}).status_code
        == 404
    )
    assert saved(app, chat_id) == ["ONE", "three"]
    response = client.delete(f"/api/session/{chat_id}/queue")
    assert response.status_code == 200 and response.get_json() == {
        "items": [],
        "paused": False,
        "deleted": 2,
    }
    assert saved(app, chat_id) == []


def test_an_item_of_another_chat_is_not_found(app, client, chat_id):
    other = client.post("/api/session", json={"title": "other"}).get_json()["id"]
    (item,) = queue_up(app, other, "elsewhere")
    assert (
        client.patch(f"/api/session/{chat_id}/queue/{item}", json={"message": "x"}).status_code
        == 404
    )
    assert client.delete(f"/api/session/{chat_id}/queue/{item}").status_code == 404
    assert saved(app, other) == ["elsewhere"]


def test_a_full_queue_refuses_more_and_changes_nothing(app, client, chat_id):
    queue_up(app, chat_id, *[f"m{n}" for n in range(followups.MAX_QUEUED)])
    response = client.post(
        "/api/chat_stream", json={"session": chat_id, "message": "more", "queue": True}
    )
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "queue_full"
    response = client.post(
        "/api/chat_stream", json={"session": chat_id, "message": "more", "queue": "maybe"}
    )
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "invalid_input"
    assert len(saved(app, chat_id)) == followups.MAX_QUEUED


def test_deleting_the_chat_clears_its_queue(app, client, chat_id):
    queue_up(app, chat_id, "one", "two")
    assert client.delete(f"/api/session/{chat_id}").status_code in (200, 204)
    assert saved(app, chat_id) == []
    assert client.get(f"/api/session/{chat_id}/queue").status_code == 404


def test_page_forms_answer_with_the_escaped_queue(app, client, chat_id):
    first, second = queue_up(app, chat_id, "one", "two")
    page = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f'id="queued-{first}"' in page and "Queue paused" in page
    response = client.post(
        f"/c/{chat_id}/queue/{first}",
        data={"message": "<b>bold</b>"},
        headers={"HX-Request": "true"},
    )
    html = response.get_data(as_text=True)
    assert (
        response.status_code == 200 and "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold" not in html
    )
    response = client.post(f"/c/{chat_id}/queue/{second}/delete", headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert f'id="queued-{first}"' in html and f'id="queued-{second}"' not in html
    assert saved(app, chat_id) == ["<b>bold</b>"]


def test_an_item_put_back_keeps_its_place(app, client, chat_id):
    """When another turn starts between taking the next item and starting it, the item
    goes back to the head of the queue, under its id."""
    first, _ = queue_up(app, chat_id, "one", "two")
    with app.app_context():
        taken = followups.take_next(chat_id)
        assert taken["id"] == first and taken["message"] == "one"
        db.session.remove()
    assert saved(app, chat_id) == ["two"]
    with app.app_context():
        followups.put_back(taken)
        db.session.remove()
    assert saved(app, chat_id) == ["one", "two"]
    assert [i["id"] for i in client.get(f"/api/session/{chat_id}/queue").get_json()["items"]][
        0
    ] == first
