"""Hybrid retrieval (issue 37), in-process through the real HTTP API: vectors from the scripted
endpoint's /v1/embeddings (the real openai SDK), and from the local WordLlama as itself;
full text and vectors fused, each passage saying why and where it was found; an endpoint
that rate-limits, answers another dimension or is down leaves the document pending with
the reason while full-text search goes on; a changed model re-indexes in the background."""

from __future__ import annotations

import io

import pytest

from numi.knowledge.embedding import LOCAL_MODEL
from numi.knowledge.index import wait_for_indexing
from numi.testing import Scenario
from server_wait import WAIT_SECONDS

GUIDE = b"""# Garden guide

## Tomatoes

Tomatoes need full sun and regular watering. Prune the side shoots weekly.

## Roses

Roses like rich soil; feed them in spring.
"""
BIOLOGY = (
    b"Photosynthesis happens in the chloroplast. Chlorophyll absorbs light, and the plant "
    b"turns carbon dioxide and water into glucose and oxygen."
)
HISTORY = b"The printing press spread books across Europe in the fifteenth century."


def upload(client, name: str, data: bytes) -> int:
    response = client.post(
        "/api/upload",
        data={"file": (io.BytesIO(data), name)},
        content_type="multipart/form-data",
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["attachments"][0]["id"]


def use_endpoint(client, scripted, base_url: str | None = None) -> int:
    response = client.post(
        "/api/endpoints",
        json={
            "name": f"Embedder at {base_url or 'the scripted provider'}",
            "kind": "openai_chat",
            "base_url": base_url or scripted.openai_base_url,
        },
    )
    assert response.status_code == 201, response.get_json()
    endpoint_id = response.get_json()["id"]
    saved = client.put(
        "/api/documents/settings",
        json={"embedding": {"endpoint_id": endpoint_id, "model": "scripted-embed"}},
    )
    assert saved.status_code == 200, saved.get_json()
    assert saved.get_json()["search"].startswith("Words and meaning")
    return endpoint_id


def documents(client) -> dict[str, dict]:
    return {d["filename"]: d for d in client.get("/api/documents").get_json()["documents"]}


def search(client, q: str, **params) -> dict:
    response = client.get("/api/documents/search", query_string={"q": q, **params})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_words_and_meaning_fused_with_an_endpoints_embeddings(app, client, scripted):
    use_endpoint(client, scripted)
    upload(client, "guide.md", GUIDE)
    upload(client, "biology.txt", BIOLOGY)
    upload(client, "history.txt", HISTORY)
    wait_for_indexing(app, timeout=WAIT_SECONDS)

    states = documents(client)
    assert {d["vectors"] for d in states.values()} == {"done"}, states
    sent = [r.body for r in scripted.embedding_requests]
    assert sent and all(body["model"] == "scripted-embed" for body in sent)

    found = search(client, "how often should tomatoes be watered", limit=3)
    assert found["mode"] == "hybrid" and found["note"] is None
    assert found["ranked_by"] is None  # the local word matching is the local model's only
    best = found["passages"][0]
    assert best["name"] == "guide.md"
    assert best["where"] == {"chunk": 1, "heading": "Garden guide › Tomatoes"}
    assert best["found_by"] == ["words", "meaning"]
    assert "regular watering" in best["text"]
    assert [p["score"] for p in found["passages"]] == sorted(
        (p["score"] for p in found["passages"]), reverse=True
    )


def test_a_failing_endpoint_leaves_vectors_pending_and_full_text_working(
    sqlite_app, sqlite_client, scripted
):
    app, client = sqlite_app, sqlite_client
    use_endpoint(client, scripted)
    scripted.embedding_failures.append(Scenario.http_error(429, message="slow down"))
    upload(client, "biology.txt", BIOLOGY)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    biology = documents(client)["biology.txt"]
    assert biology["status"] == "done" and biology["vectors"] == "pending"
    assert biology["vectors_error"].startswith("embedding_rate_limited:")
    found = search(client, "chlorophyll")
    assert found["passages"][0]["name"] == "biology.txt"
    assert found["passages"][0]["found_by"] == ["words"]

    # The next model answers shorter vectors than the ones already kept: refused, pending.
    client.post("/api/documents/index")
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert documents(client)["biology.txt"]["vectors"] == "done"
    scripted.embedding_dim = 32
    upload(client, "history.txt", HISTORY)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    history = documents(client)["history.txt"]
    assert history["vectors"] == "pending"
    assert history["vectors_error"].startswith("embedding_wrong_dimension:")
    assert "32 dimensions" in history["vectors_error"]
    assert search(client, "printing press")["passages"][0]["name"] == "history.txt"

    # An endpoint that is down: the search says why it used words only, and still answers.
    use_endpoint(client, scripted, base_url="http://127.0.0.1:9/v1")
    found = search(client, "printing press")
    assert found["mode"] == "full_text" and "embedding endpoint failed" in found["note"]
    assert found["passages"][0]["name"] == "history.txt"


def test_the_local_model_finds_meaning_and_a_changed_model_reindexes(
    sqlite_app, sqlite_client, scripted, require_extra
):
    require_extra("wordllama", "knowledge")
    app, client = sqlite_app, sqlite_client
    settings = client.get("/api/documents/settings").get_json()
    assert settings["embedding"] == "local" and settings["local_installed"]
    upload(client, "biology.txt", BIOLOGY)
    upload(client, "history.txt", HISTORY)
    upload(client, "guide.md", GUIDE)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    assert {d["vectors"] for d in documents(client).values()} == {"done"}

    # No word of the question is in the document: only its meaning finds it. Of these four
    # chunks, the local word matching (late_interaction.py) ranks the garden guide's two
    # above it: "sunshine" is "sun" to the model, and "food" "feed".
    found = search(client, "How do green leaves make food from sunshine?", limit=3)
    assert found["mode"] == "hybrid" and found["ranked_by"] == "local"
    names = [p["name"] for p in found["passages"]]
    assert "biology.txt" in names and "history.txt" not in names, found
    biology = found["passages"][names.index("biology.txt")]
    assert biology["found_by"][0] == "meaning" and "words" not in biology["found_by"], found

    # Another model: every document is indexed again in the background, with its name.
    use_endpoint(client, scripted)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    with app.app_context():
        from numi.extensions import db

        models = set(
            db.session.execute(db.text("SELECT DISTINCT embedding_model FROM document_index"))
            .scalars()
            .all()
        )
    assert models == {
        f"endpoint:{client.get('/api/documents/settings').get_json()['embedding']['endpoint_id']}/scripted-embed"
    }
    assert LOCAL_MODEL not in models


@pytest.mark.parametrize(
    "query, code",
    [
        ({"q": ""}, "invalid_documents_query"),
        ({"q": "x" * 1001}, "invalid_documents_query"),
        ({"q": "tomato", "limit": "0"}, "invalid_documents_query"),
        ({"q": "tomato", "limit": "many"}, "invalid_documents_query"),
        ({"q": "tomato", "project_id": "abc"}, "invalid_documents_query"),
        ({"q": "tomato", "project_id": "999999"}, "unknown_project"),
    ],
)
def test_bad_search_input_is_refused_with_its_code(sqlite_client, query, code):
    response = sqlite_client.get("/api/documents/search", query_string=query)
    assert response.status_code in (400, 404)
    assert response.get_json()["error"]["code"] == code


@pytest.mark.parametrize(
    "body, code",
    [
        ({"embedding": "magic"}, "invalid_documents_settings"),
        ({"embedding": {"endpoint_id": "x", "model": "m"}}, "invalid_documents_settings"),
        ({"embedding": "local", "other": 1}, "invalid_documents_settings"),
    ],
)
def test_bad_settings_are_refused_and_change_nothing(sqlite_client, body, code):
    before = sqlite_client.get("/api/documents/settings").get_json()
    response = sqlite_client.put("/api/documents/settings", json=body)
    assert response.status_code == 400 and response.get_json()["error"]["code"] == code
    assert sqlite_client.get("/api/documents/settings").get_json() == before


def test_another_users_documents_never_surface(multi_app, client_a, client_b):
    # A code word, not a number: scores and sizes are numbers that could hold "4711".
    upload(client_b, "bob-secret.txt", b"The zebra vault code is Quetzalbrot.")
    upload(client_a, "alice.txt", b"Alice keeps bees; the zebra is her favourite animal.")
    bob_project = client_b.post("/api/projects", json={"name": "Bob's"}).get_json()
    wait_for_indexing(multi_app, timeout=WAIT_SECONDS)

    found = search(client_a, "zebra vault code", limit=20)
    assert [p["name"] for p in found["passages"]] == ["alice.txt"]
    assert "Quetzalbrot" not in str(found)
    foreign = client_a.get(
        "/api/documents/search", query_string={"q": "zebra", "project_id": bob_project["id"]}
    )
    assert foreign.status_code == 404
    assert foreign.get_json()["error"]["code"] == "unknown_project"
    assert [p["name"] for p in search(client_b, "zebra")["passages"]] == ["bob-secret.txt"]
    library = client_a.get("/library?q=zebra+vault").get_data(as_text=True)
    assert "alice.txt" in library and "bob-secret" not in library and "Quetzalbrot" not in library
    bobs = documents(client_b)["bob-secret.txt"]["id"]
    assert client_a.post(f"/library/{bobs}/index").status_code == 404


def test_question_words_are_left_out_of_what_is_searched(sqlite_app, sqlite_client):
    """A question ("How can you ...?") is asked of both indexes without its question
    words: left in, a chunk full of them (rare words in documents) outranks the one about
    the question's subject. A query of question words only is searched as it is, and a
    word in capitals is a name."""
    app, client = sqlite_app, sqlite_client
    saved = client.put("/api/documents/settings", json={"embedding": "none"})
    assert saved.status_code == 200, saved.get_json()
    upload(client, "chatter.txt", b"What is it? How can you do this, and where and when and why?")
    upload(client, "garden.txt", b"Tomatoes need watering every summer evening.")
    upload(client, "health.txt", b"The WHO guidance on vaccines for travellers.")
    upload(client, "travel.txt", b"Vaccines, vaccines: vaccines before travel.")
    wait_for_indexing(app, timeout=WAIT_SECONDS)

    found = search(client, "How can you water tomatoes?", limit=2)
    assert found["mode"] == "full_text"
    assert [p["name"] for p in found["passages"]] == ["garden.txt"], found
    assert [p["name"] for p in search(client, "What is this?")["passages"]] == ["chatter.txt"]
    # A word in capitals is a name ("WHO"), not a question word.
    assert search(client, "WHO vaccines")["passages"][0]["name"] == "health.txt"
