"""Temporary chats, on both databases: listed nowhere (sidebar, /api/sessions, search,
`export --all`) but counted in usage; discarded when the user starts another chat or after
NUMI_TEMPORARY_CHAT_HOURS idle; "Keep this chat" makes one normal; a temporary flag on an
existing chat is refused with a stable code and changes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

WORD = "zanzibarian"


def add_exchange(app, chat_id: str, *, idle_hours: float = 0) -> None:
    """A question and an answer (with token counts) in `chat_id`, last active `idle_hours`
    ago."""
    from numi.extensions import db
    from numi.models import Chat, Message, utcnow

    with app.app_context():
        db.session.add(Message(chat_id=chat_id, role="user", content=f"Tell me about {WORD}"))
        db.session.flush()
        answer = Message(chat_id=chat_id, role="assistant", content=f"{WORD} facts")
        answer.meta = {"model": "model-x", "usage": {"input_tokens": 40, "output_tokens": 2}}
        db.session.add(answer)
        chat = db.session.get(Chat, chat_id)
        chat.updated_at = utcnow() - timedelta(hours=idle_hours)
        db.session.commit()


def new_chat(client, **body) -> dict:
    response = client.post("/api/session", json={"title": f"About {WORD}", **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def listed_ids(client) -> set[str]:
    ids = set()
    for view in ("all", "sidebar", "archived"):
        body = client.get(f"/api/sessions?view={view}").get_json()
        ids |= {c["id"] for c in body["sessions"] + body.get("pinned", [])}
    return ids


def stored(app, chat_id: str):
    from numi.extensions import db
    from numi.models import Chat, Message

    with app.app_context():
        chat = db.session.get(Chat, chat_id)
        texts = list(
            db.session.execute(select(Message.content).where(Message.chat_id == chat_id)).scalars()
        )
        return chat.deleted_at, chat.temporary, texts


def test_a_temporary_chat_is_listed_nowhere_but_counts_in_usage(app, client):
    kept = new_chat(client)
    temporary = new_chat(client, temporary=True)
    assert temporary["temporary"] is True and kept["temporary"] is False
    add_exchange(app, temporary["id"])

    assert kept["id"] in listed_ids(client) and temporary["id"] not in listed_ids(client)
    assert client.get(f"/api/session/{temporary['id']}").status_code == 200  # its owner opens it
    home = client.get("/").get_data(as_text=True)
    assert f"/c/{kept['id']}" in home and f"/c/{temporary['id']}" not in home
    found = client.get(f"/api/search?q={WORD}").get_json()
    assert temporary["id"] not in {c["id"] for c in found["chats"]}
    assert temporary["id"] not in {m["chat_id"] for m in found["messages"]}
    usage = client.get("/api/usage?period=all").get_json()
    assert usage["total"]["input_tokens"] == 40
    page = client.get(f"/c/{temporary['id']}").get_data(as_text=True)
    assert "Temporary chat." in page and "Keep this chat" in page
    assert "It uses none of your memories and saves none." in page
    assert "Keep this chat" not in client.get(f"/c/{kept['id']}").get_data(as_text=True)


def test_starting_another_chat_discards_the_temporary_one(app, client):
    temporary = new_chat(client, temporary=True)
    add_exchange(app, temporary["id"])
    new_chat(client)
    assert client.get(f"/api/session/{temporary['id']}").status_code == 404
    deleted_at, _, texts = stored(app, temporary["id"])
    assert deleted_at is not None and texts == [None, None]  # nothing left to read
    # ... and what it spent still counts.
    assert client.get("/api/usage?period=all").get_json()["total"]["input_tokens"] == 40


def test_the_home_page_form_starts_a_temporary_chat_and_the_next_one_discards_it(app, client):
    response = client.post("/chats", data={"temporary": "1"})
    assert response.status_code == 302
    first = response.headers["Location"].rsplit("/", 1)[1]
    assert stored(app, first)[1] is True
    # "+ New chat" never reuses a temporary chat, and it discards it.
    second = client.post("/chats", data={}).headers["Location"].rsplit("/", 1)[1]
    assert second != first and stored(app, first)[0] is not None
    assert stored(app, second)[1] is False


def test_an_idle_temporary_chat_expires(make_app):
    app = make_app(NUMI_TEMPORARY_CHAT_HOURS=2)
    client = app.test_client()
    from numi.extensions import db
    from numi.identity import local_user
    from numi.models import Chat

    with app.app_context():
        user = local_user()
        idle, fresh = Chat(user_id=user.id, temporary=True), Chat(user_id=user.id, temporary=True)
        db.session.add_all([idle, fresh])
        db.session.commit()
        idle_id, fresh_id = idle.id, fresh.id
    add_exchange(app, idle_id, idle_hours=3)
    add_exchange(app, fresh_id, idle_hours=1)
    assert client.get(f"/api/session/{idle_id}").status_code == 404  # swept before it is seen
    assert client.get(f"/api/session/{fresh_id}").status_code == 200
    assert stored(app, idle_id)[2] == [None, None]


def test_keep_this_chat_makes_it_a_normal_chat(app, client):
    by_form = new_chat(client, temporary=True)
    response = client.post(f"/c/{by_form['id']}/keep", headers={"HX-Request": "true"})
    assert response.status_code == 204 and response.headers["HX-Refresh"] == "true"
    assert by_form["id"] in listed_ids(client)
    # It is normal now: the next chat does not discard it.
    by_api = new_chat(client, temporary=True)
    response = client.patch(f"/api/session/{by_api['id']}", json={"temporary": False})
    assert response.status_code == 200 and response.get_json()["temporary"] is False
    new_chat(client)
    assert {by_form["id"], by_api["id"]} <= listed_ids(client)


@pytest.mark.parametrize("value", [True, "1", "on"])
def test_a_temporary_flag_on_an_existing_chat_is_refused(app, client, value):
    chat = new_chat(client)
    response = client.patch(
        f"/api/session/{chat['id']}", json={"temporary": value, "title": "Renamed"}
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "temporary_existing"
    after = client.get(f"/api/session/{chat['id']}").get_json()
    assert after["title"] == f"About {WORD}" and after["temporary"] is False


def test_a_malformed_temporary_flag_creates_nothing(app, client):
    before = listed_ids(client)
    for value in ("maybe", 3, ["x"]):
        response = client.post("/api/session", json={"temporary": value})
        assert response.status_code == 400
        assert response.get_json()["error"]["code"] == "invalid_temporary"
    from numi.extensions import db
    from numi.models import Chat

    with app.app_context():
        assert db.session.execute(select(Chat.id)).scalars().all() == list(before)


def test_another_user_cannot_keep_or_see_a_temporary_chat(multi_app, client_a, client_b):
    chat = new_chat(client_a, temporary=True)
    assert client_b.post(f"/c/{chat['id']}/keep").status_code == 404
    assert client_b.get(f"/api/session/{chat['id']}").status_code == 404
    assert client_a.get(f"/api/session/{chat['id']}").get_json()["temporary"] is True


def test_export_all_leaves_temporary_chats_out(app, client, numi_cli, tmp_path):
    kept = new_chat(client)
    temporary = new_chat(client, temporary=True)
    add_exchange(app, temporary["id"])
    out = tmp_path / "backup"
    result, _ = numi_cli(
        "export", "--all", str(out), NUMI_DATABASE_URL=app.config["NUMI_DATABASE_URL"]
    )
    assert result.returncode == 0, result.stderr
    exported = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.name != "prompts.json"]
    text = json.dumps(exported)
    assert kept["id"] in text or f"About {WORD}" in text
    assert WORD + " facts" not in text


def database_bytes(app) -> bytes:
    """The SQLite database as it is on disk: the main file and its write-ahead log."""
    path = Path(make_url(app.config["NUMI_DATABASE_URL"]).database)
    return b"".join(
        p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists()
    )


def test_a_discarded_temporary_chats_text_leaves_the_database_file(sqlite_app):
    """Not only the rows: the bytes. Part of the chat is in the main file already (a
    checkpoint ran), part only in the write-ahead log, and one answer is long enough for
    overflow pages."""
    import sqlite3

    from numi.extensions import db
    from numi.models import Message

    client = sqlite_app.test_client()
    temporary = new_chat(client, temporary=True)
    add_exchange(sqlite_app, temporary["id"])
    with sqlite_app.app_context():
        db.session.add(Message(chat_id=temporary["id"], role="user", content="Old whisper"))
        db.session.commit()
        path = make_url(sqlite_app.config["NUMI_DATABASE_URL"]).database
    with sqlite3.connect(path) as connection:  # into the main file
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with sqlite_app.app_context():
        db.session.add(Message(chat_id=temporary["id"], role="user", content="New whisper"))
        long = "Long whisper " + "confidential " * 2000
        db.session.add(Message(chat_id=temporary["id"], role="assistant", content=long))
        db.session.commit()
    assert all(text in database_bytes(sqlite_app) for text in (b"Old whisper", b"New whisper"))

    new_chat(client, title="Another")  # discards the temporary chat
    assert stored(sqlite_app, temporary["id"])[0] is not None
    on_disk = database_bytes(sqlite_app)
    for text in (WORD.encode(), b"Old whisper", b"New whisper", b"Long whisper", b"confidential"):
        assert text not in on_disk, text


def test_keeping_a_temporary_chat_makes_it_searchable_and_the_index_stays_whole(sqlite_app):
    """A temporary chat is not in the search index (so nothing of it lingers there); kept,
    it is indexed; and the index agrees with the messages throughout."""
    import sqlite3

    client = sqlite_app.test_client()
    temporary = new_chat(client, temporary=True)
    add_exchange(sqlite_app, temporary["id"])
    path = make_url(sqlite_app.config["NUMI_DATABASE_URL"]).database

    def indexed() -> int:
        with sqlite3.connect(path) as connection:
            # Fails (SQLITE_CORRUPT_VTAB) when the index is inconsistent, as a 'delete' of
            # an entry never added leaves it. (Not against the messages: only some are in.)
            connection.execute(
                "INSERT INTO fts_messages(fts_messages, rank) VALUES ('integrity-check', 0)"
            )
            return connection.execute(
                "SELECT count(*) FROM fts_messages WHERE fts_messages MATCH ?", (WORD,)
            ).fetchone()[0]

    assert indexed() == 0
    assert client.post(f"/c/{temporary['id']}/keep").status_code == 302
    assert indexed() == 2
    found = client.get(f"/api/search?q={WORD}").get_json()
    assert temporary["id"] in {m["chat_id"] for m in found["messages"]}
    # A temporary chat deleted outright (its user goes, say) leaves the index whole too.
    again = new_chat(client, temporary=True)
    add_exchange(sqlite_app, again["id"])
    from numi.extensions import db
    from numi.models import Chat

    with sqlite_app.app_context():
        db.session.delete(db.session.get(Chat, again["id"]))
        db.session.commit()
    assert indexed() == 2  # the kept chat's
