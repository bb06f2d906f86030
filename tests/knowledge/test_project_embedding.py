"""A project's own embedding model (issue 37): chosen in its defaults (the API's
`settings.embedding`, the project page's form), it makes its files' vectors and the query
vectors of a search in the project, while the user's other documents keep the user's model;
a change re-indexes the project's files in the background through the indexer's one path
for a changed model, and unset it goes back to the user's. Bad values are refused with
`invalid_project_embedding` (a foreign endpoint is a 404) and change nothing. Vectors from
the scripted endpoint's /v1/embeddings through the real openai SDK; SQLite and PostgreSQL
(`app` and `client` are parametrised)."""

from __future__ import annotations

import io

import pytest

from numi.knowledge.index import wait_for_indexing
from server_wait import WAIT_SECONDS

MANUAL = b"""# Espresso machine manual

## Descaling

Descale the boiler every 200 shots with citric acid dissolved in warm water.
"""
NOTES = b"Bees make honey from nectar; the hive keeps warm in winter."


def add_endpoint(
    client, scripted, name: str = "Embedder", kind: str = "openai_chat", base_url: str = ""
) -> int:
    if not base_url:
        base_url = scripted.anthropic_base_url if kind == "anthropic" else scripted.openai_base_url
    response = client.post(
        "/api/endpoints", json={"name": name, "kind": kind, "base_url": base_url}
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def use_for_user(client, endpoint_id: int, model: str) -> None:
    saved = client.put(
        "/api/documents/settings", json={"embedding": {"endpoint_id": endpoint_id, "model": model}}
    )
    assert saved.status_code == 200, saved.get_json()


def project_with_file(client, name: str = "Kitchen") -> tuple[int, int]:
    project = client.post("/api/projects", json={"name": name}).get_json()["id"]
    added = client.post(
        f"/api/projects/{project}/files",
        data={"file": (io.BytesIO(MANUAL), "manual.md")},
        content_type="multipart/form-data",
    )
    assert added.status_code == 201, added.get_json()
    return project, added.get_json()["files"][0]["id"]


def upload(client, name: str, data: bytes) -> int:
    response = client.post(
        "/api/upload", data={"file": (io.BytesIO(data), name)}, content_type="multipart/form-data"
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["attachments"][0]["id"]


def models(client) -> dict[str, tuple[str | None, str | None]]:
    """Each document's vectors: (state, the model that made them)."""
    rows = client.get("/api/documents").get_json()["documents"]
    return {d["filename"]: (d["vectors"], d["vectors_model"]) for d in rows}


def set_model(client, project: int, embedding) -> dict:
    response = client.patch(f"/api/projects/{project}", json={"settings": {"embedding": embedding}})
    assert response.status_code == 200, response.get_json()
    return response.get_json()["settings"]


def test_a_projects_model_makes_its_files_vectors_and_its_searches_queries(app, client, scripted):
    endpoint = add_endpoint(client, scripted)
    use_for_user(client, endpoint, "user-embed")
    project, _ = project_with_file(client)
    assert set_model(client, project, {"endpoint_id": endpoint, "model": " project-embed "}) == {
        "embedding": {"endpoint_id": endpoint, "model": "project-embed"}
    }
    upload(client, "notes.txt", NOTES)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client) == {
        "manual.md": ("done", f"endpoint:{endpoint}/project-embed"),
        "notes.txt": ("done", f"endpoint:{endpoint}/user-embed"),
    }

    # A search in the project asks the project's model for the question's vector, and its
    # vectors find the file; the user's search of everything asks the user's model.
    scripted.embedding_requests.clear()
    found = client.get(
        "/api/documents/search", query_string={"q": "descale the boiler", "project_id": project}
    ).get_json()
    assert found["mode"] == "hybrid", found
    assert found["passages"][0]["name"] == "manual.md"
    assert "meaning" in found["passages"][0]["found_by"]
    assert [r.body["model"] for r in scripted.embedding_requests] == ["project-embed"]
    scripted.embedding_requests.clear()
    client.get("/api/documents/search", query_string={"q": "honey"})
    assert [r.body["model"] for r in scripted.embedding_requests] == ["user-embed"]

    # Another model: the project's file is indexed again with it, the other document not.
    scripted.embedding_requests.clear()
    set_model(client, project, {"endpoint_id": endpoint, "model": "project-embed-2"})
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client) == {
        "manual.md": ("done", f"endpoint:{endpoint}/project-embed-2"),
        "notes.txt": ("done", f"endpoint:{endpoint}/user-embed"),
    }
    assert {r.body["model"] for r in scripted.embedding_requests} == {"project-embed-2"}

    # Unset (the page's "Yours"): back to the user's model, through the same re-index.
    assert set_model(client, project, "") == {}
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client)["manual.md"] == ("done", f"endpoint:{endpoint}/user-embed")

    # "none": the project's files are searched by their words only, its search says so.
    set_model(client, project, "none")
    found = client.get(
        "/api/documents/search", query_string={"q": "descale", "project_id": project}
    ).get_json()
    assert found["mode"] == "full_text" and found["passages"][0]["found_by"] == ["words"]


def test_the_project_page_form_picks_and_unsets_the_model(app, client, scripted):
    endpoint = add_endpoint(client, scripted)
    project, _ = project_with_file(client)
    page = client.get(f"/p/{project}").get_data(as_text=True)
    assert 'name="embedding"' in page and "Yours (Settings → Documents)" in page
    saved = client.post(
        f"/p/{project}/defaults",
        data={"embedding": f"endpoint:{endpoint}", "embedding_model": "form-embed"},
    )
    assert saved.status_code == 303
    settings = client.get(f"/api/projects/{project}").get_json()["settings"]
    assert settings["embedding"] == {"endpoint_id": endpoint, "model": "form-embed"}
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client)["manual.md"] == ("done", f"endpoint:{endpoint}/form-embed")
    page = client.get(f"/p/{project}").get_data(as_text=True)
    assert f'<option value="endpoint:{endpoint}" selected>' in page
    assert "full-text search and form-embed, fused" in page

    # A new chat of the project does not take the project's model into its own settings:
    # its questions use it through the project.
    chat = client.post("/api/session", json={"project_id": project})
    assert chat.status_code == 201, chat.get_json()
    assert "embedding" not in (chat.get_json().get("settings") or {})

    # An exported project keeps no endpoint of this server.
    exported = client.get(f"/api/projects/{project}/export").get_json()
    assert "embedding" not in exported["project"]["settings"]

    client.post(f"/p/{project}/defaults", data={"embedding": ""})
    assert "embedding" not in client.get(f"/api/projects/{project}").get_json()["settings"]


@pytest.mark.parametrize(
    "embedding, status",
    [
        ("magic", 400),
        (["local"], 400),
        ({"endpoint_id": "x", "model": "m"}, 400),
        ({"endpoint_id": True, "model": "m"}, 400),
        ({"endpoint_id": "ENDPOINT", "model": ""}, 400),
        ({"endpoint_id": "ENDPOINT", "model": "m" * 201}, 400),
        ({"endpoint_id": "ENDPOINT", "model": "m", "extra": 1}, 400),
        ({"endpoint_id": "ANTHROPIC", "model": "m"}, 400),
        ({"endpoint_id": 999999, "model": "m"}, 404),
    ],
)
def test_bad_project_models_are_refused_and_change_nothing(client, scripted, embedding, status):
    endpoint = add_endpoint(client, scripted)
    anthropic = add_endpoint(client, scripted, "Claude-like", kind="anthropic")
    if isinstance(embedding, dict) and embedding.get("endpoint_id") in ("ENDPOINT", "ANTHROPIC"):
        embedding = {
            **embedding,
            "endpoint_id": endpoint if embedding["endpoint_id"] == "ENDPOINT" else anthropic,
        }
    project = client.post(
        "/api/projects", json={"name": "Kept", "settings": {"embedding": "local"}}
    ).get_json()
    assert project["settings"] == {"embedding": "local"}
    response = client.patch(
        f"/api/projects/{project['id']}", json={"settings": {"embedding": embedding}}
    )
    assert response.status_code == status
    expected = "invalid_project_embedding" if status == 400 else "not_found"
    assert response.get_json()["error"]["code"] == expected
    assert client.get(f"/api/projects/{project['id']}").get_json()["settings"] == {
        "embedding": "local"
    }
    form = client.post(f"/p/{project['id']}/defaults", data={"embedding": "magic"})
    assert form.status_code == 400
    assert client.get(f"/api/projects/{project['id']}").get_json()["settings"] == {
        "embedding": "local"
    }


def test_another_users_endpoint_and_project_are_not_found(multi_app, client_a, client_b, scripted):
    # Not an administrator: an endpoint outside this machine (never reached here).
    bobs_endpoint = add_endpoint(
        client_b, scripted, "Bob's embedder", base_url="https://api.example.test/v1"
    )
    bobs_project = client_b.post("/api/projects", json={"name": "Bob's"}).get_json()["id"]
    alices = client_a.post("/api/projects", json={"name": "Alice's"}).get_json()["id"]
    refused = client_a.patch(
        f"/api/projects/{alices}",
        json={"settings": {"embedding": {"endpoint_id": bobs_endpoint, "model": "m"}}},
    )
    assert refused.status_code == 404
    assert client_a.get(f"/api/projects/{alices}").get_json()["settings"] == {}
    foreign = client_a.patch(
        f"/api/projects/{bobs_project}", json={"settings": {"embedding": "none"}}
    )
    assert foreign.status_code == 404
    assert client_b.get(f"/api/projects/{bobs_project}").get_json()["settings"] == {}


def test_a_project_chats_own_attachment_is_embedded_with_the_projects_model(app, client, scripted):
    from numi.extensions import db
    from numi.knowledge.retrieval import chat_passages
    from numi.models import Chat, Message
    from numi.services import services

    endpoint = add_endpoint(client, scripted)
    use_for_user(client, endpoint, "user-embed")
    project = client.post("/api/projects", json={"name": "Kitchen"}).get_json()["id"]
    set_model(client, project, {"endpoint_id": endpoint, "model": "project-embed"})
    manual = upload(client, "manual.md", MANUAL)  # uploaded before it is sent, as in the app
    upload(client, "notes.txt", NOTES)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client)["manual.md"] == ("done", f"endpoint:{endpoint}/user-embed")

    # The question that attaches it, in a chat of the project (as the send path saves it).
    with app.app_context():
        user_id = db.session.execute(db.text("SELECT id FROM users")).scalar_one()
        chat = Chat(user_id=user_id, project_id=project, title="Descaling")
        db.session.add(chat)
        db.session.flush()
        question = Message(chat_id=chat.id, role="user", content="How often do I descale?")
        question.content_parts = [
            {"type": "text", "text": "How often do I descale?"},
            {"type": "attachment", "id": manual},
        ]
        db.session.add(question)
        db.session.commit()
        chat_id = chat.id

    def passages():
        with app.test_request_context():
            return chat_passages(user_id, chat_id, {})

    # The chat's next request indexes it again with the project's model, which its question
    # is embedded with, so its vectors find it; the user's other document keeps the user's.
    passages()
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert models(client) == {
        "manual.md": ("done", f"endpoint:{endpoint}/project-embed"),
        "notes.txt": ("done", f"endpoint:{endpoint}/user-embed"),
    }
    scripted.embedding_requests.clear()
    found = passages()
    assert found is not None and found.mode == "hybrid"
    assert found.passages[0].document_id == manual
    assert "meaning" in found.passages[0].found_by
    assert [r.body["model"] for r in scripted.embedding_requests] == ["project-embed"]
    # Nothing to do the next time: it is not indexed again.
    passages()
    assert not [job for job in services(app).document_jobs.values() if not job.dead]
