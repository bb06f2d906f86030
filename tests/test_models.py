"""Models: JSON columns survive a round trip through the database; soft delete hides rows."""

from __future__ import annotations

import pytest

from numi.extensions import db
from numi.models import Chat, Endpoint, Message, User

UNICODE = (
    'Grüße, 你好, مرحبا, emoji 🦊👩🏽‍💻, zero-width \u200b, nul-free "quotes" and \\ backslash'
)


def _user(username="owner") -> User:
    user = User(username=username)
    db.session.add(user)
    db.session.commit()
    return user


MESSAGE_JSON = {
    "content_parts": [
        {"type": "text", "text": UNICODE},
        {"type": "attachment", "attachment_id": 7, "filename": "Übersicht 📄.pdf"},
    ],
    "reasoning_details": [
        {"type": "thinking", "thinking": "Hmm… " + UNICODE, "signature": "sig==/+"},
        {"type": "reasoning.encrypted", "data": "gAAAA" * 50},
    ],
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "ä/ß.txt"}'},
        },
        {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
    ],
    "citation_sources": [{"url": "https://example.org/ünï", "title": UNICODE, "index": 1}],
    "meta": {
        "model": "gpt-x",
        "usage": {"input_tokens": 12, "output_tokens": 3, "nested": {"a": [1, 2.5, None, True]}},
        "finish_reason": "stop",
        "error": None,
        "note": UNICODE,
    },
}


def test_message_json_columns_round_trip(app):
    with app.app_context():
        chat = Chat(user_id=_user().id, title=UNICODE[:100])
        db.session.add(chat)
        db.session.flush()
        message = Message(chat_id=chat.id, role="assistant", content=UNICODE)
        for name, value in MESSAGE_JSON.items():
            setattr(message, name, value)
        db.session.add(message)
        db.session.commit()
        message_id = message.id
        db.session.expunge_all()  # read back from the database, not the identity map

        loaded = db.session.get(Message, message_id)
        for name, value in MESSAGE_JSON.items():
            assert getattr(loaded, name) == value, name
        assert loaded.content == UNICODE
        # The API shape decodes every JSON column.
        as_dict = loaded.to_dict()
        for name, value in MESSAGE_JSON.items():
            assert as_dict[name] == value
        # Stored as readable text, not \u escapes.
        assert "你好" in loaded.meta_json


def test_empty_json_columns_read_as_empty(app):
    with app.app_context():
        chat = Chat(user_id=_user().id)
        db.session.add(chat)
        db.session.flush()
        db.session.add(Message(chat_id=chat.id, role="user", content="hi"))
        db.session.commit()
        db.session.expunge_all()
        message = db.session.execute(db.select(Message)).scalar_one()
        assert message.tool_calls == [] and message.content_parts == [] and message.meta == {}
        assert message.reasoning_details == [] and message.citation_sources == []


def test_chat_settings_and_endpoint_models_round_trip(app):
    settings = {
        "system_prompt": "Réponds en français. " + UNICODE,
        "temperature": 0.7,
        "max_tokens": 4096,
        "reasoning_effort": "high",
        "tools": ["bash", "read_file"],
        "fallbacks": [{"endpoint_id": 2, "model": "claude-ü"}],
    }
    models = [
        {"id": "llama3.1:8b", "context_window": 131072, "supports_tools": True},
        {"id": "qwen2.5-coder:7b-ünïcode"},
    ]
    with app.app_context():
        user = _user()
        endpoint = Endpoint(
            user_id=user.id,
            name="Ollama 🦙",
            kind="openai_chat",
            base_url="http://127.0.0.1:11434/v1",
        )
        endpoint.models = models
        db.session.add(endpoint)
        db.session.flush()
        chat = Chat(user_id=user.id, endpoint_id=endpoint.id, title="t")
        chat.settings = settings
        db.session.add(chat)
        db.session.commit()
        chat_id, endpoint_id = chat.id, endpoint.id
        db.session.expunge_all()

        assert db.session.get(Chat, chat_id).settings == settings
        loaded = db.session.get(Endpoint, endpoint_id)
        assert loaded.models == models
        assert loaded.model_ids == ["llama3.1:8b", "qwen2.5-coder:7b-ünïcode"]
        assert loaded.name == "Ollama 🦙"


def test_request_id_is_unique_per_chat(app):
    from sqlalchemy.exc import IntegrityError

    with app.app_context():
        user = _user()
        first, second = Chat(user_id=user.id), Chat(user_id=user.id)
        db.session.add_all([first, second])
        db.session.flush()
        db.session.add_all(
            [
                Message(chat_id=first.id, role="user", request_id="r1"),
                Message(chat_id=second.id, role="user", request_id="r1"),  # other chat: fine
                Message(chat_id=first.id, role="assistant"),  # no request id: fine, many allowed
                Message(chat_id=first.id, role="assistant"),
            ]
        )
        db.session.commit()
        db.session.add(Message(chat_id=first.id, role="user", request_id="r1"))
        with pytest.raises(IntegrityError):
            db.session.commit()
        db.session.rollback()


def test_message_ids_increase_in_insert_order(app):
    with app.app_context():
        chat = Chat(user_id=_user().id)
        db.session.add(chat)
        db.session.commit()
        ids = []
        for n in range(5):
            message = Message(chat_id=chat.id, role="user", content=str(n))
            db.session.add(message)
            db.session.commit()
            ids.append(message.id)
        # Deleting the newest row must not let its id be reused (the id orders the transcript).
        db.session.delete(message)
        db.session.commit()
        again = Message(chat_id=chat.id, role="user", content="again")
        db.session.add(again)
        db.session.commit()
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert again.id > ids[-1]


# --- soft delete hides rows everywhere -----------------------------------------------------


def test_soft_deleted_chat_and_messages_disappear_everywhere(client, app):
    keep = client.post("/api/session", json={"title": "keeper chat"}).get_json()
    gone = client.post("/api/session", json={"title": "doomed chat"}).get_json()
    with app.app_context():
        from numi.models import utcnow

        db.session.add_all(
            [
                Message(chat_id=keep["id"], role="user", content="visible message"),
                Message(
                    chat_id=keep["id"],
                    role="assistant",
                    content="hidden answer",
                    deleted_at=utcnow(),
                ),
                Message(chat_id=gone["id"], role="user", content="message of doomed chat"),
            ]
        )
        db.session.commit()

    # Before deletion the doomed chat is visible: the checks below are not vacuous.
    assert "doomed chat" in client.get("/").get_data(as_text=True)
    assert client.get(f"/api/history/{gone['id']}").status_code == 200

    assert client.delete(f"/api/session/{gone['id']}").status_code == 200

    titles = [s["title"] for s in client.get("/api/sessions").get_json()["sessions"]]
    assert titles == ["keeper chat"]
    assert client.get("/api/sessions?q=doomed").get_json()["sessions"] == []
    for url in (
        f"/api/history/{gone['id']}",
        f"/api/session/{gone['id']}",
        f"/c/{gone['id']}",
        f"/c/{gone['id']}/messages",
        f"/c/{gone['id']}/item",
        f"/c/{gone['id']}/rename",
    ):
        assert client.get(url).status_code == 404, url
    assert client.patch(f"/api/session/{gone['id']}", json={"title": "back"}).status_code == 404
    assert client.delete(f"/api/session/{gone['id']}").status_code == 404
    for page in ("/", f"/c/{keep['id']}", "/chats?q=doomed", "/chats"):
        body = client.get(
            page, headers={"HX-Request": "true"} if page.startswith("/chats") else {}
        ).get_data(as_text=True)
        assert "doomed chat" not in body, page

    # A soft-deleted message is not in the history nor in the page.
    history = client.get(f"/api/history/{keep['id']}").get_json()["messages"]
    assert [m["content"] for m in history] == ["visible message"]
    page = client.get(f"/c/{keep['id']}").get_data(as_text=True)
    assert "visible message" in page and "hidden answer" not in page

    # The row itself is kept (soft delete), with deleted_at set.
    with app.app_context():
        row = db.session.get(Chat, gone["id"])
        assert row is not None and row.deleted_at is not None


def test_deleted_endpoint_is_hidden(client):
    created = client.post(
        "/api/endpoints",
        json={"name": "Gone soon", "kind": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
    ).get_json()
    assert any(
        e["id"] == created["id"] for e in client.get("/api/endpoints").get_json()["endpoints"]
    )
    assert client.delete(f"/api/endpoints/{created['id']}").status_code == 200
    assert client.get("/api/endpoints").get_json()["endpoints"] == []
    assert "Gone soon" not in client.get("/settings/endpoints").get_data(as_text=True)
    assert client.get(f"/api/endpoints/{created['id']}/models").status_code == 404
    assert client.post("/api/session", json={"endpoint_id": created["id"]}).status_code == 404
