"""A project's own embedding model in its chats (issue 37): the question of a chat in the
project is turned into a vector by the project's model (recorded by the scripted endpoint's
/v1/embeddings), and the passage its vectors find reaches the request's system context, while
the user's own choice is full text only. Live `numi serve` on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, run_turn, turn_server_env, upload, wait_until

MANUAL = b"""# Espresso machine manual

## Descaling

Descale the boiler every 200 shots with citric acid dissolved in warm water.
"""
PASSAGE = "Descale the boiler every 200 shots with citric acid"


@pytest.fixture(scope="module")
def server(live_server_factory, module_database_url):
    started = live_server_factory(**turn_server_env(NUMI_DATABASE_URL=module_database_url))
    yield started
    started.stop()


def test_a_project_chats_question_is_embedded_by_the_projects_model(server, scripted):
    api = Api(server.url)
    chat = make_chat(api, scripted)
    endpoint = chat["endpoint"]["id"]
    status, saved = api.call("PUT", "/api/documents/settings", {"embedding": "none"})
    assert status == 200 and saved["search"].startswith("Full-text search only"), saved
    status, project = api.post(
        "/api/projects",
        {
            "name": "Kitchen",
            "settings": {"embedding": {"endpoint_id": endpoint, "model": "project-embed"}},
        },
    )
    assert status == 201, project
    status, uploaded = upload(server.url, "manual.md", MANUAL, "text/markdown")
    assert status == 201, uploaded
    attachment = uploaded["attachments"][0]["id"]
    status, added = api.post(f"/api/projects/{project['id']}/files", {"attachment_id": attachment})
    assert status == 201, added

    def vectors_done():
        [manual] = api.get("/api/documents")[1]["documents"]
        return manual["vectors"] == "done" and manual["vectors_model"]

    model = wait_until(vectors_done, timeout=60, what="the manual's vectors")
    assert model == f"endpoint:{endpoint}/project-embed"

    status, moved = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200, moved
    scripted.embedding_requests.clear()
    scripted.enqueue(Scenario().text("Every 200 shots [1]."))
    question = "How often must the boiler be descaled?"
    run_turn(server, chat["id"], question, timeout=60)
    # Embedded without its question words ("How", "the", "be"), as full text searches it.
    embedded = "often must boiler descaled?"
    asked = [r.body for r in scripted.embedding_requests if r.body["input"] == [embedded]]
    assert [body["model"] for body in asked] == ["project-embed"], scripted.embedding_requests
    [system] = [m for m in scripted.last_request.body["messages"] if m["role"] == "system"]
    assert PASSAGE in system["content"]
