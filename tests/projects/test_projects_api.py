"""Projects and memories through the JSON API (issue 21): create, list, move chats in and
out, defaults of a new chat, files, delete (keep or delete the chats), memories and the
memory switch, exports and imports; every route scoped to its owner; bad input answers a
stable code and changes nothing. On SQLite and PostgreSQL (`client` is parametrised)."""

from __future__ import annotations

import io
import json

import pytest
from import_support import run_import


def make_project(client, **fields) -> dict:
    response = client.post("/api/projects", json={"name": "Thesis", **fields})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def make_session(client, **fields) -> dict:
    response = client.post("/api/session", json=fields)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def error(response) -> tuple[int, str]:
    return response.status_code, response.get_json()["error"]["code"]


def test_create_list_get_patch(client):
    project = make_project(
        client,
        instructions="Answer in British English.",
        settings={"system_prompt": "Be brief.", "tools": ["search_documents"], "temperature": 0.3},
    )
    assert project["id"] and project["name"] == "Thesis"
    assert project["settings"] == {
        "system_prompt": "Be brief.",
        "tools": ["search_documents"],
        "temperature": 0.3,
    }
    listed = client.get("/api/projects").get_json()["projects"]
    assert [(p["name"], p["chats"]) for p in listed] == [("Thesis", 0)]
    patched = client.patch(f"/api/projects/{project['id']}", json={"name": "  Thesis 2 "})
    assert patched.status_code == 200 and patched.get_json()["name"] == "Thesis 2"
    got = client.get(f"/api/projects/{project['id']}").get_json()
    assert got["instructions"] == "Answer in British English."
    assert got["chats"] == [] and got["files"] == [] and got["memories"] == []


def test_chats_move_in_and_out_and_take_defaults(client):
    project = make_project(
        client, settings={"system_prompt": "Project default.", "tools": ["current_time"]}
    )
    chat = make_session(client, project_id=project["id"], title="In project")
    assert chat["project_id"] == project["id"]
    assert chat["settings"] == {"system_prompt": "Project default.", "tools": ["current_time"]}
    given = make_session(client, project_id=project["id"], settings={"system_prompt": "Mine."})
    assert given["settings"]["system_prompt"] == "Mine.", "what is given wins over the defaults"
    other = make_session(client, title="Loose")
    assert other["project_id"] is None
    moved = client.patch(f"/api/session/{other['id']}", json={"project_id": project["id"]})
    assert moved.status_code == 200 and moved.get_json()["project_id"] == project["id"]
    listed = client.get("/api/projects").get_json()["projects"]
    assert listed[0]["chats"] == 3
    out = client.patch(f"/api/session/{other['id']}", json={"project_id": None})
    assert out.get_json()["project_id"] is None
    in_project = client.get(f"/api/projects/{project['id']}").get_json()["chats"]
    assert {c["id"] for c in in_project} == {chat["id"], given["id"]}


@pytest.mark.parametrize(
    "body, code",
    [
        ({"name": ""}, "invalid_project_name"),
        ({"name": "   "}, "invalid_project_name"),
        ({"name": "x" * 101}, "invalid_project_name"),
        ({"name": 7}, "invalid_project_name"),
        ({}, "invalid_project_name"),
        ({"name": "ok", "instructions": "x" * 20_001}, "invalid_instructions"),
        ({"name": "ok", "instructions": ["no"]}, "invalid_instructions"),
        ({"name": "ok", "settings": {"bogus": 1}}, "unknown_setting"),
        ({"name": "ok", "settings": {"temperature": 9}}, "invalid_input"),
        ({"name": "ok", "settings": {"endpoint_id": 999}}, "not_found"),
    ],
)
def test_bad_project_input_changes_nothing(client, body, code):
    response = client.post("/api/projects", json=body)
    assert response.status_code in (400, 404) and error(response)[1] == code
    assert client.get("/api/projects").get_json()["projects"] == []


def test_bad_patch_changes_nothing(client):
    project = make_project(client, instructions="Keep me.")
    response = client.patch(
        f"/api/projects/{project['id']}", json={"name": "New", "instructions": "x" * 20_001}
    )
    assert error(response) == (400, "invalid_instructions")
    got = client.get(f"/api/projects/{project['id']}").get_json()
    assert (got["name"], got["instructions"]) == ("Thesis", "Keep me.")


def test_unknown_project_id_changes_nothing(client):
    chat = make_session(client, title="Stay")
    for value in (999, "1", True, -1):
        response = client.patch(
            f"/api/session/{chat['id']}", json={"project_id": value, "title": "Gone"}
        )
        assert error(response) == (404, "unknown_project"), value
    assert client.get(f"/api/session/{chat['id']}").get_json()["title"] == "Stay"
    assert error(client.post("/api/session", json={"project_id": 999})) == (404, "unknown_project")
    assert error(client.post("/api/memories", json={"text": "x", "project_id": 999})) == (
        404,
        "unknown_project",
    )
    assert client.get("/api/memories?project_id=all").get_json()["memories"] == []


def test_delete_keeps_or_deletes_chats(client):
    keep = make_project(client, name="Keep")
    kept_chat = make_session(client, project_id=keep["id"])
    client.post("/api/memories", json={"text": "A project fact.", "project_id": keep["id"]})
    assert error(client.delete(f"/api/projects/{keep['id']}")) == (400, "invalid_delete_mode")
    assert error(client.delete(f"/api/projects/{keep['id']}?chats=maybe")) == (
        400,
        "invalid_delete_mode",
    )
    assert client.get(f"/api/projects/{keep['id']}").status_code == 200, "nothing changed"
    response = client.delete(f"/api/projects/{keep['id']}?chats=keep")
    assert response.status_code == 200 and response.get_json()["deleted_chats"] == 0
    assert client.get(f"/api/session/{kept_chat['id']}").get_json()["project_id"] is None
    assert client.get(f"/api/projects/{keep['id']}").status_code == 404
    assert client.get("/api/memories?project_id=all").get_json()["memories"] == []

    gone = make_project(client, name="Gone")
    gone_chat = make_session(client, project_id=gone["id"])
    response = client.delete(f"/api/projects/{gone['id']}", json={"chats": "delete"})
    assert response.get_json()["deleted_chats"] == 1
    assert client.get(f"/api/session/{gone_chat['id']}").status_code == 404
    assert client.get(f"/api/session/{kept_chat['id']}").status_code == 200


def test_files_upload_list_and_attach_existing(client):
    project = make_project(client)
    response = client.post(
        f"/api/projects/{project['id']}/files",
        data={"file": (io.BytesIO(b"The secret word is marmalade."), "notes.txt")},
        content_type="multipart/form-data",
    )
    assert response.status_code == 201, response.get_json()
    [uploaded] = response.get_json()["files"]
    other = client.post(
        "/api/upload",
        data={"file": (io.BytesIO(b"second file"), "b.txt")},
        content_type="multipart/form-data",
    ).get_json()["attachments"][0]
    added = client.post(f"/api/projects/{project['id']}/files", json={"attachment_id": other["id"]})
    assert added.status_code == 201
    files = client.get(f"/api/projects/{project['id']}/files").get_json()["files"]
    assert [f["filename"] for f in files] == ["notes.txt", "b.txt"]
    assert error(
        client.post(f"/api/projects/{project['id']}/files", json={"attachment_id": 99999})
    ) == (404, "attachment_missing")
    assert uploaded["id"] in {f["id"] for f in files}


def test_memories_crud_switch_and_bad_input(client):
    prefs = client.get("/api/preferences").get_json()
    assert prefs["memory"] is False, "memory is off until the user turns it on"
    assert client.patch("/api/preferences", json={"memory": True}).get_json()["memory"] is True
    assert (
        error(client.patch("/api/preferences", json={"memory": "perhaps", "theme": "dark"}))[1]
        == "invalid_input"
    )
    prefs = client.get("/api/preferences").get_json()
    assert (prefs["theme"], prefs["memory"]) == ("system", True), (
        "a bad memory value changes neither key"
    )
    made = client.post("/api/memories", json={"text": "  I live in Lyon.  "})
    assert made.status_code == 201 and made.get_json()["text"] == "I live in Lyon."
    memory_id = made.get_json()["id"]
    for text in ("", "   ", "x" * 501, None, 5):
        assert error(client.post("/api/memories", json={"text": text})) == (400, "invalid_memory")
        assert error(client.patch(f"/api/memories/{memory_id}", json={"text": text})) == (
            400,
            "invalid_memory",
        )
    edited = client.patch(f"/api/memories/{memory_id}", json={"text": "I live in Paris."})
    assert edited.get_json()["text"] == "I live in Paris."
    body = client.get("/api/memories").get_json()
    assert body["memory"] is True and [m["text"] for m in body["memories"]] == ["I live in Paris."]
    assert client.delete(f"/api/memories/{memory_id}").status_code == 200
    assert client.get("/api/memories").get_json()["memories"] == []
    assert client.patch("/api/preferences", json={"theme": "dark"}).get_json()["memory"] is True


def test_memory_limit(make_app):
    client = make_app(NUMI_MAX_MEMORIES=2).test_client()
    for text in ("one", "two"):
        assert client.post("/api/memories", json={"text": text}).status_code == 201
    assert error(client.post("/api/memories", json={"text": "three"})) == (400, "too_many_memories")
    assert len(client.get("/api/memories").get_json()["memories"]) == 2


def test_another_users_project_and_memory_are_404(client_a, client_b):
    project = make_project(client_a)
    memory = client_a.post("/api/memories", json={"text": "Alice's fact"}).get_json()
    pid = project["id"]
    for method, path, body in [
        ("get", f"/api/projects/{pid}", None),
        ("patch", f"/api/projects/{pid}", {"name": "stolen"}),
        ("delete", f"/api/projects/{pid}?chats=delete", None),
        ("get", f"/api/projects/{pid}/files", None),
        ("post", f"/api/projects/{pid}/files", {"attachment_id": 1}),
        ("get", f"/api/projects/{pid}/export", None),
        ("patch", f"/api/memories/{memory['id']}", {"text": "stolen"}),
        ("delete", f"/api/memories/{memory['id']}", None),
        ("get", f"/api/memories?project_id={pid}", None),
    ]:
        response = getattr(client_b, method)(path, json=body)
        assert response.status_code == 404, (method, path)
    chat = make_session(client_b)
    assert error(client_b.patch(f"/api/session/{chat['id']}", json={"project_id": pid})) == (
        404,
        "unknown_project",
    )
    assert client_b.get("/api/projects").get_json()["projects"] == []
    assert client_b.get("/api/memories?project_id=all").get_json()["memories"] == []
    assert client_a.get(f"/api/projects/{pid}").get_json()["name"] == "Thesis"
    assert client_a.get("/api/memories").get_json()["memories"][0]["text"] == "Alice's fact"


def test_chat_export_carries_the_project(client):
    project = make_project(client, instructions="Cite page numbers.")
    chat = make_session(client, project_id=project["id"])
    document = json.loads(client.get(f"/api/session/{chat['id']}/export?fmt=json").data)
    assert document["chat"]["project"] == {"name": "Thesis", "instructions": "Cite page numbers."}


def test_project_and_memories_export_and_import(client):
    project = make_project(client, instructions="Use SI units.", settings={"system_prompt": "Hi."})
    chat = make_session(client, project_id=project["id"], title="Lab notes")
    client.post(
        f"/api/projects/{project['id']}/files",
        data={"file": (io.BytesIO(b"Boiling point 100 C."), "lab.txt")},
        content_type="multipart/form-data",
    )
    client.post("/api/memories", json={"text": "Lab is room 4.", "project_id": project["id"]})
    client.post("/api/memories", json={"text": "I am a chemist."})
    exported = json.loads(client.get(f"/api/projects/{project['id']}/export").data)
    assert exported["format"] == "numi.project"
    assert [c["chat"]["title"] for c in exported["chats"]] == ["Lab notes"]
    assert exported["memories"] == [{"text": "Lab is room 4."}]
    assert [f["filename"] for f in exported["files"]] == ["lab.txt"]

    imported = run_import(client, json=exported)
    assert imported["state"] == "done", imported
    new_id = imported["result"]["project"]["id"]
    assert new_id != project["id"]
    got = client.get(f"/api/projects/{new_id}").get_json()
    assert got["instructions"] == "Use SI units." and got["settings"] == {"system_prompt": "Hi."}
    assert [c["title"] for c in got["chats"]] == ["Lab notes"] and chat["id"] not in {
        c["id"] for c in got["chats"]
    }
    assert [f["filename"] for f in got["files"]] == ["lab.txt"]
    assert [m["text"] for m in got["memories"]] == ["Lab is room 4."]

    memories = json.loads(client.get("/api/memories/export").data)
    assert memories["memories"] == [{"text": "I am a chemist."}]
    client.delete(f"/api/memories/{client.get('/api/memories').get_json()['memories'][0]['id']}")
    again = run_import(client, json=memories)
    assert again["state"] == "done" and again["result"]["skipped"] == 0
    twice = run_import(client, json=memories)
    assert twice["result"]["skipped"] == 1, "a second import changes nothing"
    assert [m["text"] for m in client.get("/api/memories").get_json()["memories"]] == [
        "I am a chemist."
    ]


def test_bad_project_import_creates_nothing(client):
    bad = {
        "format": "numi.project",
        "version": 1,
        "project": {"name": "Broken"},
        "files": [{"filename": "x.txt", "content_base64": "not base64!!"}],
        "chats": [],
    }
    assert run_import(client, json=bad)["error"]["code"] == "invalid_import"
    bad["files"] = []
    bad["project"]["name"] = ""
    assert run_import(client, json=bad)["error"]["code"] == "invalid_import"
    bad["project"]["name"] = "Ok"
    bad["chats"] = [{"format": "numi.chat", "version": 1, "chat": {}, "messages": "no"}]
    assert run_import(client, json=bad)["error"]["code"] == "invalid_import"
    assert client.get("/api/projects").get_json()["projects"] == []
    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_the_page_forms_without_javascript(client):
    """The project page, the chat's Project menu and Settings → Memory post plain forms."""
    made = client.post("/projects", data={"name": "Kitchen"})
    assert made.status_code == 303
    project_id = int(made.headers["Location"].rsplit("/", 1)[1])
    page = client.get(f"/p/{project_id}").get_data(as_text=True)
    assert "Kitchen" in page and "New chat in Kitchen" in page
    assert client.post(f"/p/{project_id}/edit", data={"instructions": "Metric."}).status_code == 303
    assert client.get(f"/api/projects/{project_id}").get_json()["instructions"] == "Metric."
    bad = client.post(f"/p/{project_id}/edit", data={"name": ""})
    assert bad.status_code == 400
    assert client.get(f"/api/projects/{project_id}").get_json()["name"] == "Kitchen"

    started = client.post(f"/p/{project_id}/chats")
    chat_id = started.headers["Location"].rsplit("/", 1)[1]
    assert client.get(f"/api/session/{chat_id}").get_json()["project_id"] == project_id
    assert client.post(f"/c/{chat_id}/project", data={"project_id": ""}).status_code == 303
    assert client.get(f"/api/session/{chat_id}").get_json()["project_id"] is None
    assert client.post(f"/c/{chat_id}/project", data={"project_id": "x"}).status_code == 404
    client.post(f"/c/{chat_id}/project", data={"project_id": str(project_id)})
    assert client.get(f"/api/session/{chat_id}").get_json()["project_id"] == project_id

    assert client.post("/settings/memory", data={"memory": "1"}).status_code == 303
    client.post("/memories", data={"text": "Salt to taste."})
    client.post("/memories", data={"text": "Oven runs hot.", "project_id": str(project_id)})
    settings = client.get("/settings/memory").get_data(as_text=True)
    assert "Memory is on." in settings and "Salt to taste." in settings
    assert "Oven runs hot." not in settings, "a project's memories are on its page"
    assert "Oven runs hot." in client.get(f"/p/{project_id}").get_data(as_text=True)
    own = client.get("/api/memories").get_json()["memories"][0]
    client.post(f"/memories/{own['id']}/edit", data={"text": "Salt lightly."})
    assert client.get("/api/memories").get_json()["memories"][0]["text"] == "Salt lightly."
    assert client.post(f"/memories/{own['id']}/edit", data={"text": ""}).status_code == 400
    client.post(f"/memories/{own['id']}/delete")
    assert client.get("/api/memories").get_json()["memories"] == []

    # Deleting asks what becomes of the chats; the form names the choice.
    assert client.post(f"/p/{project_id}/delete", data={}).status_code == 400
    assert client.post(f"/p/{project_id}/delete", data={"chats": "delete"}).status_code == 303
    assert client.get(f"/api/session/{chat_id}").status_code == 404
    assert client.get(f"/p/{project_id}").status_code == 404


def test_untrusted_names_and_memories_are_escaped(client):
    evil = '<img src=x onerror="alert(1)">'
    project = make_project(client, name=evil, instructions=evil)
    client.post("/api/memories", json={"text": evil, "project_id": project["id"]})
    client.post("/api/memories", json={"text": evil})
    chat = make_session(client, project_id=project["id"])
    for path in ("/", f"/p/{project['id']}", "/settings/memory", f"/c/{chat['id']}"):
        html = client.get(path).get_data(as_text=True)
        assert evil not in html, path
        assert "&lt;img src=x" in html, path


def test_a_projects_chats_are_listed_under_it_not_in_the_chat_list(client):
    """As in ChatGPT: the sidebar's chat list leaves out the chats of projects (their
    project's page lists them); search still finds them, and a pinned one stays pinned."""
    project = make_project(client, name="Attic")
    inside = make_session(client, title="Inside chat", project_id=project["id"])
    loose = make_session(client, title="Loose chat")
    pinned = make_session(client, title="Pinned inside", project_id=project["id"])
    assert client.patch(f"/api/session/{pinned['id']}", json={"pinned": True}).status_code == 200

    def sidebar(path: str) -> str:
        html = client.get(path).get_data(as_text=True)
        return html.split('id="chat-list"', 1)[1]

    for path in ("/", f"/c/{loose['id']}", f"/c/{inside['id']}", f"/p/{project['id']}"):
        listed = sidebar(path)
        assert f'id="chat-{loose["id"]}"' in listed, path
        assert f'id="chat-{inside["id"]}"' not in listed, path
        assert f'id="chat-{pinned["id"]}"' in listed, (path, "a pin stays in Pinned")
    project_page = client.get(f"/p/{project['id']}").get_data(as_text=True)
    assert "Inside chat" in project_page.split('id="chats"', 1)[1]
    # The list's pages and the sidebar view of the API agree; "all" and search list it.
    more = client.get("/chats", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f'id="chat-{inside["id"]}"' not in more
    ids = lambda body: [c["id"] for c in body["sessions"]]  # noqa: E731
    assert inside["id"] not in ids(client.get("/api/sessions?view=sidebar").get_json())
    assert inside["id"] in ids(client.get("/api/sessions").get_json())
    found = client.get("/chats?q=Inside", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f'id="chat-{inside["id"]}"' in found
    listed = client.get(f"/api/sessions?view=sidebar&project_id={project['id']}").get_json()
    assert ids(listed) == [inside["id"]]
    # With every chat in a project, the empty list says where they are.
    client.patch(f"/api/session/{loose['id']}", json={"project_id": project["id"]})
    client.patch(f"/api/session/{pinned['id']}", json={"pinned": False})
    assert "No chats outside your projects." in sidebar("/")
    # Out of the project, it is back in the list.
    client.patch(f"/api/session/{inside['id']}", json={"project_id": None})
    assert f'id="chat-{inside["id"]}"' in sidebar("/")


def test_a_projects_chat_gets_its_new_title_without_a_sidebar_item(app, client):
    """The title_update fragment swaps the header's title; the sidebar item only for a chat
    the list shows (a project's chat is not there: a swap would miss its target)."""
    from flask import g

    from numi.chat import chats
    from numi.identity import local_user
    from numi.web.live.fragments import HtmlView

    project = make_project(client)
    inside = make_session(client, project_id=project["id"])
    loose = make_session(client)
    with app.test_request_context("/"):
        g.user = local_user()
        for chat_id, listed in ((inside["id"], False), (loose["id"], True)):
            chat = chats.get_chat(g.user.id, chat_id)
            view = HtmlView(chat)
            html = "".join(view.render({"type": "title_update", "data": {"title": "Walruses"}}))
            assert "Walruses" in html
            assert (f'id="chat-{chat_id}"' in html) is listed, html


def test_the_same_memory_is_refused_and_nothing_changes(client):
    made = client.post("/api/memories", json={"text": "I live in Lyon."})
    assert made.status_code == 201
    other = client.post("/api/memories", json={"text": "I cycle to work."}).get_json()
    # The exact text again (spaces around it are not the text), by POST or by an edit.
    for text in ("I live in Lyon.", "  I live in Lyon. "):
        assert error(client.post("/api/memories", json={"text": text})) == (409, "duplicate_memory")
    assert error(
        client.patch(f"/api/memories/{other['id']}", json={"text": "I live in Lyon."})
    ) == (
        409,
        "duplicate_memory",
    )
    texts = [m["text"] for m in client.get("/api/memories").get_json()["memories"]]
    assert texts == ["I live in Lyon.", "I cycle to work."]
    # A memory may keep its own text; the same fact for a project is another scope.
    assert (
        client.patch(f"/api/memories/{other['id']}", json={"text": "I cycle to work."}).status_code
        == 200
    )
    project = make_project(client)
    shared = client.post(
        "/api/memories", json={"text": "I live in Lyon.", "project_id": project["id"]}
    )
    assert shared.status_code == 201
    assert error(
        client.post("/api/memories", json={"text": "I live in Lyon.", "project_id": project["id"]})
    ) == (409, "duplicate_memory")


def test_the_project_pages_upload_form_adds_all_its_files_or_none(client):
    """The project page's Upload form (not the JSON route) adds every chosen file to the
    project; a request with a refused file (here an empty one) adds none of its files."""
    project = make_project(client)
    path = f"/p/{project['id']}/files"
    two = [(io.BytesIO(b"alpha"), "a.txt"), (io.BytesIO(b"beta"), "b.txt")]
    response = client.post(path, data={"file": two}, content_type="multipart/form-data")
    assert response.status_code == 303 and response.headers["Location"].endswith("#files")
    assert _file_names(client, project) == ["a.txt", "b.txt"]
    refused = [(io.BytesIO(b"gamma"), "c.txt"), (io.BytesIO(b""), "empty.txt")]
    response = client.post(path, data={"file": refused}, content_type="multipart/form-data")
    assert response.status_code == 400
    assert _file_names(client, project) == ["a.txt", "b.txt"]


def _file_names(client, project: dict) -> list[str]:
    files = client.get(f"/api/projects/{project['id']}/files").get_json()["files"]
    return [f["filename"] for f in files]
