"""Organising chats through the JSON API and the HTML routes: pins, archive, tags, bulk
actions with undo, and the theme; every change scoped to its owner; bad input changes
nothing. Runs on SQLite and PostgreSQL (the `client` fixtures are parametrised)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from numi.chat.organising import UNDO_SECONDS
from numi.extensions import db
from numi.models import Chat, utcnow


def new_chat(client, title: str) -> str:
    response = client.post("/api/session", json={"title": title})
    assert response.status_code == 201
    return response.get_json()["id"]


def sidebar(client, **args) -> dict:
    response = client.get("/api/sessions", query_string={"view": "sidebar", **args})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    return {
        "pinned": [c["title"] for c in body["pinned"]],
        "sessions": [c["title"] for c in body["sessions"]],
    }


def test_pinned_chats_head_the_sidebar_until_unpinned(client):
    ids = {title: new_chat(client, title) for title in ("one", "two", "three")}
    patched = client.patch(f"/api/session/{ids['one']}", json={"pinned": True})
    assert patched.status_code == 200 and patched.get_json()["pinned"] is True
    assert sidebar(client) == {"pinned": ["one"], "sessions": ["three", "two"]}
    # The pinned group is in the HTML sidebar too, above the date groups.
    html = client.get("/chats", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert (
        html.index(">Pinned<")
        < html.index(f'id="chat-{ids["one"]}"')
        < html.index(">Today<")
        < html.index(f'id="chat-{ids["three"]}"')
    )

    client.patch(f"/api/session/{ids['one']}", json={"pinned": False})
    assert sidebar(client) == {"pinned": [], "sessions": ["three", "two", "one"]}
    # GET /api/sessions (view "all", the default) still lists every live chat.
    assert len(client.get("/api/sessions").get_json()["sessions"]) == 3


def test_archived_chats_leave_the_sidebar_are_found_by_search_and_restore(client):
    keep = new_chat(client, "daily notes")
    gone = new_chat(client, "old holiday plans")
    assert (
        client.patch(f"/api/session/{gone}", json={"archived": True}).get_json()["archived"] is True
    )
    assert sidebar(client)["sessions"] == ["daily notes"]
    assert [c["id"] for c in client.get("/api/sessions?view=archived").get_json()["sessions"]] == [
        gone
    ]
    # Search finds it (API and the sidebar's title search, marked Archived).
    assert [c["id"] for c in client.get("/api/sessions?q=holiday").get_json()["sessions"]] == [gone]
    found = client.get("/search?q=holiday&mode=titles", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    assert f'id="chat-{gone}"' in found and "Archived" in found
    assert client.get(f"/api/session/{gone}").status_code == 200  # still opens
    # The Archived view lists it with Restore; restoring brings it back.
    page = client.get("/archived").get_data(as_text=True)
    assert "old holiday plans" in page and "daily notes" not in page and "Restore" in page
    restored = client.post(
        f"/c/{gone}/organise?view=archived", data={"archived": "0"}, headers={"HX-Request": "true"}
    )
    assert restored.status_code == 200 and restored.get_data(as_text=True) == ""
    assert sidebar(client)["sessions"] == ["old holiday plans", "daily notes"]
    assert client.get("/api/sessions?view=archived").get_json()["sessions"] == []
    assert keep


def test_tags_filter_the_sidebar_and_bad_tags_change_nothing(client):
    work = new_chat(client, "report")
    home = new_chat(client, "garden")
    body = client.patch(
        f"/api/session/{work}", json={"tags": [" Work ", "work", "q3 plans"]}
    ).get_json()
    assert body["tags"] == [
        "q3 plans",
        "Work",
    ]  # trimmed, repeats dropped case-insensitively, sorted
    client.patch(f"/api/session/{home}", json={"tags": ["home"]})
    assert client.get("/api/tags").get_json() == {"tags": ["home", "q3 plans", "Work"]}
    assert sidebar(client, tag="Work")["sessions"] == ["report"]
    html = client.get("/search?q=&mode=titles&tag=home", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    assert f'id="chat-{home}"' in html and f'id="chat-{work}"' not in html
    # The inline editor sets the title and the tags together (comma-separated).
    client.post(f"/c/{home}/rename", data={"title": "garden 2", "tags": "home, outdoors"})
    assert client.get(f"/api/session/{home}").get_json()["tags"] == ["home", "outdoors"]

    for bad in (
        {"tags": ["x" * 41]},
        {"tags": [f"t{i}" for i in range(11)]},
        {"tags": [1]},
        {"pinned": "yes"},
        {"tags": ["fine"], "title": "t" * 100_000},
    ):
        response = client.patch(f"/api/session/{work}", json=bad)
        assert response.status_code == 400, bad
        assert response.get_json()["error"]["code"] in ("invalid_tags", "invalid_input", "too_long")
    after = client.get(f"/api/session/{work}").get_json()
    assert (
        after["tags"] == ["q3 plans", "Work"]
        and after["title"] == "report"
        and after["pinned"] is False
    )
    # Removing every tag empties the filter list of that tag.
    client.patch(f"/api/session/{work}", json={"tags": []})
    assert client.get("/api/tags").get_json() == {"tags": ["home", "outdoors"]}


def test_bulk_archive_and_delete_can_be_undone(app, client):
    ids = [new_chat(client, f"chat {i}") for i in range(4)]
    archived = client.post(
        "/api/sessions/bulk", json={"action": "archive", "ids": ids[:2]}
    ).get_json()
    assert sorted(archived["changed"]) == sorted(ids[:2])
    assert sidebar(client)["sessions"] == ["chat 3", "chat 2"]
    client.post("/api/sessions/bulk", json={"action": "unarchive", "ids": ids[:2]})
    assert len(sidebar(client)["sessions"]) == 4

    deleted = client.post(
        "/api/sessions/bulk", json={"action": "delete", "ids": ids[2:]}
    ).get_json()
    assert sorted(deleted["changed"]) == sorted(ids[2:])
    assert client.get(f"/api/session/{ids[2]}").status_code == 404
    restored = client.post(
        "/api/sessions/bulk", json={"action": "restore", "ids": ids[2:]}
    ).get_json()
    assert sorted(restored["changed"]) == sorted(ids[2:])
    assert client.get(f"/api/session/{ids[2]}").status_code == 200

    # Past the undo window a deleted chat stays deleted.
    client.post("/api/sessions/bulk", json={"action": "delete", "ids": [ids[3]]})
    with app.app_context():
        db.session.execute(
            update(Chat)
            .where(Chat.id == ids[3])
            .values(deleted_at=utcnow() - timedelta(seconds=UNDO_SECONDS + 5))
        )
        db.session.commit()
    assert (
        client.post("/api/sessions/bulk", json={"action": "restore", "ids": [ids[3]]}).get_json()[
            "changed"
        ]
        == []
    )
    assert client.get(f"/api/session/{ids[3]}").status_code == 404

    for bad, code in (
        ({"action": "explode", "ids": ids}, "invalid_action"),
        ({"action": "archive", "ids": []}, "invalid_ids"),
        ({"action": "archive", "ids": "all"}, "invalid_ids"),
        ({"action": "archive", "ids": ["x"] * 501}, "too_many"),
    ):
        response = client.post("/api/sessions/bulk", json=bad)
        assert response.status_code == 400 and response.get_json()["error"]["code"] == code
    assert len(sidebar(client)["sessions"]) == 3


def test_html_bulk_archive_answers_an_undo_toast_and_undo_restores(client):
    ids = [new_chat(client, f"chat {i}") for i in range(3)]
    response = client.post(
        "/chats/bulk", data={"action": "archive", "ids": ids[:2]}, headers={"HX-Request": "true"}
    )
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert all(f'<li id="chat-{i}" hx-swap-oob="delete">' in html for i in ids[:2])
    assert "2 chats archived." in html and "Undo" in html and 'value="unarchive"' in html
    undo = client.post(
        "/chats/bulk",
        data={"action": "unarchive", "ids": ids[:2], "toast": "toast-1"},
        headers={"HX-Request": "true"},
    ).get_data(as_text=True)
    assert (
        all(f'id="chat-{i}"' in undo for i in ids) and 'id="toast-1" hx-swap-oob="delete"' in undo
    )
    # Without JavaScript the form redirects back to the chats.
    plain = client.post("/chats/bulk", data={"action": "archive", "ids": ids[2]})
    assert plain.status_code == 302 and sidebar(client)["sessions"] == ["chat 1", "chat 0"]


def test_organising_is_scoped_to_the_owner(client_a, client_b):
    mine = new_chat(client_a, "alice's")
    client_a.patch(f"/api/session/{mine}", json={"tags": ["secret-tag"]})
    assert client_b.patch(f"/api/session/{mine}", json={"pinned": True}).status_code == 404
    assert client_b.post(f"/c/{mine}/organise", data={"archived": "1"}).status_code == 404
    for action in ("archive", "pin", "delete"):
        assert (
            client_b.post("/api/sessions/bulk", json={"action": action, "ids": [mine]}).get_json()[
                "changed"
            ]
            == []
        )
    assert client_b.get("/api/tags").get_json() == {"tags": []}
    assert client_b.get("/api/sessions?tag=secret-tag").get_json()["sessions"] == []
    body = client_a.get(f"/api/session/{mine}").get_json()
    assert body["pinned"] is False and body["archived"] is False and body["tags"] == ["secret-tag"]


def test_the_sidebar_uses_the_same_number_of_queries_for_5_or_120_chats(client, statements_of):
    def queries_for_sidebar() -> int:
        def sidebar() -> None:
            assert client.get("/chats", headers={"HX-Request": "true"}).status_code == 200

        return statements_of(sidebar)

    def add(n: int, start: int) -> None:
        for i in range(start, start + n):
            chat = new_chat(client, f"chat {i}")
            client.patch(
                f"/api/session/{chat}",
                json={"tags": [f"t{i % 3}", "all"], "pinned": i % 10 == 1, "archived": i % 7 == 0},
            )

    add(5, 0)
    few = queries_for_sidebar()
    add(115, 5)
    assert queries_for_sidebar() == few


def test_theme_is_saved_per_user_and_rendered_on_html(client):
    assert 'data-theme="system"' in client.get("/settings/appearance").get_data(as_text=True)
    response = client.post("/settings/appearance", data={"theme": "dark"})
    assert response.status_code == 302 and response.headers["Location"] == "/settings/appearance"
    page = client.get("/").get_data(as_text=True)
    assert (
        '<html lang="en" data-theme="dark">' in page
        and '<meta name="color-scheme" content="dark">' in page
    )
    assert client.get("/api/preferences").get_json()["theme"] == "dark"
    bad = client.patch("/api/preferences", json={"theme": "purple"})
    assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "invalid_theme"
    assert client.post("/settings/appearance", data={"theme": "purple"}).status_code == 400
    assert client.patch("/api/preferences", json={"theme": "light"}).get_json()["theme"] == "light"
    assert 'data-theme="light"' in client.get("/").get_data(as_text=True)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_each_user_has_their_own_theme(client_a, client_b, theme):
    client_a.post("/settings/appearance", data={"theme": theme})
    assert f'data-theme="{theme}"' in client_a.get("/").get_data(as_text=True)
    assert 'data-theme="system"' in client_b.get("/").get_data(as_text=True)
