"""Chats through the JSON API and the pages: create, list, search, paginate, rename, delete."""

from __future__ import annotations

from datetime import timedelta

from numi.extensions import db
from numi.models import Chat, Message, utcnow


def _titles(response) -> list[str]:
    return [s["title"] for s in response.get_json()["sessions"]]


def test_create_with_json_and_with_a_form(client):
    created = client.post("/api/session", json={"title": "From JSON", "system_prompt": "Be brief."})
    assert created.status_code == 201
    chat = created.get_json()
    assert chat["title"] == "From JSON" and chat["settings"]["system_prompt"] == "Be brief."
    assert len(chat["id"]) == 36

    # The seed's browser code posts a form with `name` for the title.
    form = client.post("/api/session", data={"name": "From a form", "temperature": "0.5"})
    assert form.status_code == 201, form.get_data(as_text=True)
    assert form.get_json()["title"] == "From a form"
    assert form.get_json()["settings"]["temperature"] == 0.5

    assert sorted(_titles(client.get("/api/sessions"))) == ["From JSON", "From a form"]
    assert client.get(f"/api/session/{chat['id']}").get_json()["title"] == "From JSON"


def test_create_without_fields_gets_a_default_title(client):
    chat = client.post("/api/session", json={}).get_json()
    assert chat["title"] == "New chat"


def test_sessions_are_paginated_by_last_activity(client, app):
    ids = [
        client.post("/api/session", json={"title": f"chat {n:02d}"}).get_json()["id"]
        for n in range(7)
    ]
    base = utcnow()
    with app.app_context():
        for n, chat_id in enumerate(ids):
            db.session.get(Chat, chat_id).updated_at = base - timedelta(minutes=10 - n)
        # Two chats with the same timestamp: the cursor must not skip or repeat either.
        db.session.get(Chat, ids[2]).updated_at = db.session.get(Chat, ids[3]).updated_at
        db.session.commit()

    seen, cursor, pages = [], None, 0
    while True:
        url = "/api/sessions?limit=3" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url).get_json()
        assert len(body["sessions"]) <= 3
        seen += [s["title"] for s in body["sessions"]]
        pages += 1
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert pages == 3
    assert len(seen) == 7 and len(set(seen)) == 7
    assert seen[:2] == ["chat 06", "chat 05"]  # newest activity first
    assert seen[-1] == "chat 00"


def test_search_treats_percent_and_underscore_literally(client):
    for title in ("100% done", "100 percent", "snake_case", "snakeXcase", "Plain"):
        client.post("/api/session", json={"title": title})
    assert _titles(client.get("/api/sessions?q=100%25")) == ["100% done"]
    assert _titles(client.get("/api/sessions?q=e_c")) == ["snake_case"]
    assert _titles(client.get("/api/sessions?q=PLAIN")) == ["Plain"]  # case-insensitive
    assert _titles(client.get("/api/sessions?q=nothing-like-this")) == []
    # The sidebar search uses the same query.
    fragment = client.get("/chats?q=100%25", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "100% done" in fragment and "100 percent" not in fragment


def test_history_is_paginated_newest_page_first(client, app):
    chat_id = client.post("/api/session", json={"title": "long"}).get_json()["id"]
    with app.app_context():
        for n in range(12):
            db.session.add(
                Message(
                    chat_id=chat_id, role="user" if n % 2 == 0 else "assistant", content=f"m{n}"
                )
            )
        db.session.commit()
    first = client.get(f"/api/history/{chat_id}?limit=5").get_json()
    assert [m["content"] for m in first["messages"]] == ["m7", "m8", "m9", "m10", "m11"]
    second = client.get(f"/api/history/{chat_id}?limit=5&before={first['next_cursor']}").get_json()
    assert [m["content"] for m in second["messages"]] == ["m2", "m3", "m4", "m5", "m6"]
    third = client.get(f"/api/history/{chat_id}?limit=5&before={second['next_cursor']}").get_json()
    assert [m["content"] for m in third["messages"]] == ["m0", "m1"]
    assert third["next_cursor"] is None
    message = first["messages"][0]
    for key in (
        "id",
        "chat_id",
        "role",
        "content",
        "content_parts",
        "tool_calls",
        "meta",
        "created_at",
    ):
        assert key in message

    # The chat page shows the newest page and a loader for older messages.
    client_page = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "m11" in client_page
    older = client.get(
        f"/c/{chat_id}/messages?before={first['next_cursor']}", headers={"HX-Request": "true"}
    )
    assert older.status_code == 200 and "m6" in older.get_data(as_text=True)


def test_patch_renames_and_changes_settings(client):
    chat = client.post("/api/session", json={"title": "before"}).get_json()
    patched = client.patch(
        f"/api/session/{chat['id']}",
        json={"title": "after", "settings": {"temperature": 1.2, "reasoning_effort": "low"}},
    )
    assert patched.status_code == 200
    body = patched.get_json()
    assert body["title"] == "after" and body["settings"]["temperature"] == 1.2
    assert _titles(client.get("/api/sessions")) == ["after"]
    assert "after" in client.get("/").get_data(as_text=True)


def test_delete_removes_the_chat(client):
    chat = client.post("/api/session", json={"title": "to delete"}).get_json()
    assert client.delete(f"/api/session/{chat['id']}").get_json() == {"ok": True}
    assert _titles(client.get("/api/sessions")) == []
    assert client.get(f"/api/history/{chat['id']}").status_code == 404
    assert client.get(f"/api/history/{chat['id']}").get_json()["error"]["code"] == "not_found"


def test_pages_create_rename_delete(client):
    created = client.post("/chats", data={"title": ""})
    assert created.status_code == 302
    chat_url = created.headers["Location"]
    chat_id = chat_url.rsplit("/", 1)[1]
    page = client.get(chat_url)
    assert page.status_code == 200 and "New chat" in page.get_data(as_text=True)

    # HTMX create answers a client-side redirect: to the same empty chat, not one more.
    htmx = client.post("/chats", headers={"HX-Request": "true"})
    assert htmx.status_code == 204 and htmx.headers["HX-Location"] == chat_url

    form = client.get(f"/c/{chat_id}/rename", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'name="title"' in form
    renamed = client.post(
        f"/c/{chat_id}/rename", data={"title": "Renamed inline"}, headers={"HX-Request": "true"}
    )
    assert renamed.status_code == 200
    assert f'id="chat-{chat_id}"' in renamed.get_data(as_text=True)
    assert "Renamed inline" in client.get("/").get_data(as_text=True)

    deleted = client.post(f"/c/{chat_id}/delete?current={chat_id}", headers={"HX-Request": "true"})
    # No chat left to open: home, which offers the deleted chat's Undo.
    assert deleted.status_code == 200
    assert deleted.headers["HX-Redirect"] == f"/?deleted={chat_id}"
    assert client.get(chat_url).status_code == 404
    assert "Renamed inline" not in client.get("/").get_data(as_text=True)


def test_chat_settings_form_saves_system_prompt(client):
    chat_id = client.post("/api/session", json={}).get_json()["id"]
    response = client.post(
        f"/c/{chat_id}/settings",
        data={
            "system_prompt": "You are terse.",
            "temperature": "0.3",
            "max_tokens": "",
            "reasoning_effort": "high",
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200 and "Saved." in response.get_data(as_text=True)
    settings = client.get(f"/api/session/{chat_id}").get_json()["settings"]
    assert settings["system_prompt"] == "You are terse." and settings["temperature"] == 0.3
    assert settings["reasoning_effort"] == "high"


def test_sidebar_loads_more_on_scroll(client, app):
    app.config["NUMI_PAGE_SIZE_CHATS"] = 3
    for n in range(5):
        client.post("/api/session", json={"title": f"side {n}"})
    page = client.get("/").get_data(as_text=True)
    assert page.count('class="chat-item') == 3
    assert 'hx-trigger="intersect once"' in page  # the list scrolls in its own box
    import re

    more = re.search(r'hx-get="(/chats\?[^"]+)"', page).group(1).replace("&amp;", "&")
    rest = client.get(more, headers={"HX-Request": "true"}).get_data(as_text=True)
    assert rest.count('class="chat-item') == 2 and "intersect" not in rest


def test_model_picker_uses_the_endpoint(client):
    endpoint = client.post(
        "/api/endpoints",
        json={
            "name": "Local",
            "kind": "openai_chat",
            "base_url": "http://127.0.0.1:9/v1",
            "default_model": "llama3",
        },
    ).get_json()
    chat = client.post("/api/session", json={}).get_json()
    # A new chat starts on the first endpoint with a default model.
    assert chat["endpoint_id"] == endpoint["id"] and chat["model"] == "llama3"
    response = client.post(
        f"/c/{chat['id']}/settings",
        data={"route": f"{endpoint['id']}:qwen2"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert client.get(f"/api/session/{chat['id']}").get_json()["model"] == "qwen2"
    page = client.get(f"/c/{chat['id']}").get_data(as_text=True)
    assert f'value="{endpoint["id"]}:qwen2" data-model="qwen2" selected' in page


def test_date_groups_of_the_sidebar():
    from datetime import datetime

    from numi.chat.chats import date_group

    now = datetime(2026, 3, 20, 9, 0)
    assert [date_group(datetime(2026, 3, d, 8, 0), now) for d in (20, 19, 14, 13, 1)] == [
        "Today",
        "Yesterday",
        "Previous 7 days",
        "Previous 30 days",
        "Previous 30 days",
    ]
    assert date_group(datetime(2026, 2, 18, 23, 0), now) == "February 2026"
    assert date_group(datetime(2025, 12, 31), now) == "December 2025"


def test_running_chats_answers_only_for_the_owners_chats(client_a, client_b):
    mine = client_a.post("/api/session", json={"title": "mine"}).get_json()["id"]
    theirs = client_b.post("/api/session", json={"title": "theirs"}).get_json()["id"]
    response = client_a.get(f"/chats/running?ids={mine},{theirs},not-a-chat")
    assert response.status_code == 200 and response.get_json() == {"running": []}
    assert client_a.get("/chats/running").get_json() == {"running": []}


def test_new_chat_reuses_the_empty_one_and_deleting_the_open_chat_opens_the_next(client):
    first = client.post("/chats", headers={"HX-Request": "true"}).headers["HX-Location"]
    assert client.post("/chats", headers={"HX-Request": "true"}).headers["HX-Location"] == first
    older = client.post("/api/session", json={"title": "Older"}).get_json()["id"]
    chat_id = first.rsplit("/", 1)[1]
    client.patch(f"/api/session/{chat_id}", json={"title": "Not empty by name"})
    second = client.post("/chats", headers={"HX-Request": "true"}).headers["HX-Location"]
    assert second not in (first, f"/c/{older}")  # a renamed chat is kept, not reused
    deleted = client.post(
        f"{second}/delete?current={second.rsplit('/', 1)[1]}", headers={"HX-Request": "true"}
    )
    assert deleted.headers["HX-Redirect"].startswith("/c/")
    assert client.get(deleted.headers["HX-Redirect"]).status_code == 200


def test_a_rows_menu_is_its_owners_and_moves_the_chat_back_to_the_page(client_a, client_b):
    chat = client_a.post("/api/session", json={"title": "Roses <b>"}).get_json()["id"]
    here = client_a.post("/api/session", json={"title": "here"}).get_json()["id"]
    project = client_a.post("/api/projects", json={"name": "Garden <i>"}).get_json()["id"]
    menu = client_a.get(f"/c/{chat}/menu?current={here}").get_data(as_text=True)
    for words in ("Rename", "Pin", "Move to…", "Garden &lt;i&gt;", "Archive", "Select chats"):
        assert words in menu
    assert "Out of its project" not in menu and "<i>" not in menu
    # Another user's chat has no menu for this user (the same answer as no chat at all).
    assert client_b.get(f"/c/{chat}/menu").status_code == 404
    assert client_b.get("/c/not-a-chat/menu").status_code == 404

    # Move to… goes back to the page the user was on; in a project, the menu offers the way
    # out instead of that project.
    moved = client_a.post(
        f"/c/{chat}/project",
        data={"project_id": str(project), "current": here},
        headers={"HX-Request": "true"},
    )
    assert moved.headers["HX-Location"] == f"/c/{here}"
    menu = client_a.get(f"/c/{chat}/menu").get_data(as_text=True)
    assert "Out of its project" in menu and "Garden" not in menu
    home = client_a.post(f"/c/{chat}/project", data={"project_id": "", "current": ""})
    assert home.status_code == 303 and home.headers["Location"].endswith("/")
    assert client_a.get(f"/api/session/{chat}").get_json()["project_id"] is None


def test_suggestions_are_the_users_saved_prompts_escaped(client_a, client_b):
    """(The home page shows them once there is an endpoint: tests/browser/test_home.py.)"""
    chat = client_a.post("/api/session", json={"title": "empty"}).get_json()["id"]
    page = client_a.get(f"/c/{chat}").get_data(as_text=True)
    assert 'class="suggestion" data-text="Plan a three-day trip to "' in page
    prompt = {"command": "tldr", "title": "Sum <up>", "text": 'Briefly: "{{input}}" <x>'}
    assert client_a.post("/api/prompts", json=prompt).status_code == 201
    page = client_a.get(f"/c/{chat}").get_data(as_text=True)
    assert ">Sum &lt;up&gt;</button>" in page and "Plan a trip" not in page
    assert 'data-text="Briefly: &#34;{{input}}&#34; &lt;x&gt;"' in page
    # Another user's empty chat keeps the starters: prompts are their owner's.
    theirs = client_b.post("/api/session", json={"title": "theirs"}).get_json()["id"]
    assert "Plan a trip" in client_b.get(f"/c/{theirs}").get_data(as_text=True)
