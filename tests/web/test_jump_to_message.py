"""Opening a chat on one message (a search hit or an outline entry) far up a long chat."""

from __future__ import annotations

from numi.extensions import db
from numi.identity import local_user
from numi.models import Chat, Message


def _long_chat(app, count=200):
    with app.test_request_context():
        chat = Chat(user_id=local_user().id, title="Long")
        db.session.add(chat)
        db.session.flush()
        messages = [
            Message(
                chat_id=chat.id, role="user" if i % 2 == 0 else "assistant", content=f"needle-{i}"
            )
            for i in range(count)
        ]
        db.session.add_all(messages)
        db.session.commit()
        return chat.id, [m.id for m in messages]


def test_chat_page_opens_on_an_old_message(sqlite_app, sqlite_client):
    chat_id, ids = _long_chat(sqlite_app)
    latest = sqlite_client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f'id="msg-{ids[10]}"' not in latest, "the default page shows only the newest messages"

    page = sqlite_client.get(f"/c/{chat_id}?at={ids[10]}").get_data(as_text=True)
    assert f'id="msg-{ids[10]}"' in page
    assert f'id="msg-{ids[11]}"' in page, "some newer messages follow the target"
    assert f'id="msg-{ids[-1]}"' not in page
    assert "Newer messages follow" in page


def test_search_hits_link_to_the_message_page(sqlite_app, sqlite_client):
    chat_id, ids = _long_chat(sqlite_app)
    html = sqlite_client.get(
        "/search?mode=messages&q=needle-10", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    assert f"at={ids[10]}#msg-{ids[10]}" in html
