"""User B gets a 404 from every transcript route that names user A's chat or message, and
nothing of A's changes; user A reaches the same GET routes (the control)."""

from __future__ import annotations

import pytest

from numi.extensions import db
from numi.models import Chat, Message

ROUTES = [
    ("GET", "/c/{chat}/messages/{msg}", None),
    ("GET", "/c/{chat}/messages/{msg}/edit", None),
    ("POST", "/c/{chat}/messages/{msg}/edit", {"text": "stolen"}),
    ("POST", "/api/session/{chat}/messages/{msg}/edit", {"text": "stolen"}),
    ("POST", "/c/{chat}/regenerate", {}),
    ("POST", "/api/session/{chat}/regenerate", {}),
    ("POST", "/c/{chat}/messages/{msg}/delete", {}),
    ("DELETE", "/api/session/{chat}/messages/{msg}", None),
    ("POST", "/c/{chat}/messages/restore", {"ids": "{msg}"}),
    ("POST", "/c/{chat}/messages/{msg}/fork", {}),
    ("POST", "/api/session/{chat}/messages/{msg}/fork", {}),
    ("GET", "/c/{chat}/topics", None),
    ("GET", "/api/session/{chat}/topics", None),
]


@pytest.fixture
def alice_chat(multi_app, users, rows):
    chat_id, ids = rows(
        users["a"].id,
        [("user", "alice private question"), ("assistant", "alice private answer")],
        title="alice secret chat",
    )
    return chat_id, ids


def state(app, chat_id):
    with app.app_context():
        db.session.expire_all()
        return (
            [
                (m.id, m.content, m.deleted_at)
                for m in db.session.query(Message).order_by(Message.id)
            ],
            [
                (c.id, c.title, c.endpoint_id, c.model)
                for c in db.session.query(Chat).order_by(Chat.id)
            ],
        )


@pytest.mark.parametrize("htmx", [False, True])
def test_user_b_gets_404_everywhere(multi_app, client_b, alice_chat, htmx):
    chat_id, ids = alice_chat
    before = state(multi_app, chat_id)
    headers = {"HX-Request": "true"} if htmx else {}
    for method, pattern, body in ROUTES:
        for message_id in (ids[0], ids[1]):
            url = pattern.format(chat=chat_id, msg=message_id)
            if url.startswith("/api/"):
                response = client_b.open(url, method=method, json=body, headers=headers)
            else:
                response = client_b.open(url, method=method, data=body, headers=headers)
            assert response.status_code == 404, f"{method} {url}: {response.status_code}"
            assert "alice" not in response.get_data(as_text=True)
    assert state(multi_app, chat_id) == before


def test_a_message_of_another_chat_is_not_found(
    multi_app, users, client_a, client_b, rows, alice_chat
):
    """B's own chat with A's message id: the message must belong to the chat named."""
    chat_id, ids = alice_chat
    own, _ = rows(users["b"].id, [("user", "bob question")])
    before = state(multi_app, chat_id)
    for method, pattern, body in ROUTES:
        if "{msg}" not in pattern:
            continue
        url = pattern.format(chat=own, msg=ids[0])
        response = (
            client_b.open(url, method=method, json=body)
            if url.startswith("/api/")
            else client_b.open(url, method=method, data=body)
        )
        assert response.status_code == 404, f"{method} {url}: {response.status_code}"
    assert state(multi_app, chat_id) == before


def test_user_a_reaches_the_get_routes(multi_app, client_a, alice_chat):
    chat_id, ids = alice_chat
    for method, pattern, _ in ROUTES:
        if method == "GET":
            response = client_a.get(
                pattern.format(chat=chat_id, msg=ids[0]), headers={"HX-Request": "true"}
            )
            assert response.status_code == 200, pattern
