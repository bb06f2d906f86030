"""Search limited to one project, and a project's files searched by `search_documents` in
its chats (issue 21). On SQLite and PostgreSQL (each with its own full-text engine)."""

from __future__ import annotations

import io

from numi.agent.tools import ToolContext, ToolResult
from numi.agent.tools.documents import SEARCH_DOCUMENTS
from numi.knowledge.index import wait_for_indexing
from numi.extensions import db
from numi.models import Message
from server_wait import WAIT_SECONDS


def _chat(client, title: str, project_id=None) -> str:
    body = {"title": title}
    if project_id is not None:
        body["project_id"] = project_id
    chat = client.post("/api/session", json=body).get_json()
    return chat["id"]


def _say(app, chat_id: str, text: str) -> None:
    with app.app_context():
        db.session.add(Message(chat_id=chat_id, role="user", content=text))
        db.session.commit()


def test_search_and_lists_limited_to_one_project(app, client):
    project = client.post("/api/projects", json={"name": "Orchard"}).get_json()
    inside = _chat(client, "Apple pruning", project["id"])
    outside = _chat(client, "Apple pie")
    _say(app, inside, "prune the apple trees in winter")
    _say(app, outside, "bake the apple pie for an hour")

    everywhere = client.get("/api/search?q=apple").get_json()
    assert {c["id"] for c in everywhere["chats"]} == {inside, outside}
    assert {m["chat_id"] for m in everywhere["messages"]} == {inside, outside}
    limited = client.get(f"/api/search?q=apple&project_id={project['id']}").get_json()
    assert [c["id"] for c in limited["chats"]] == [inside]
    assert [m["chat_id"] for m in limited["messages"]] == [inside]

    listed = client.get(f"/api/sessions?project_id={project['id']}").get_json()["sessions"]
    assert [c["id"] for c in listed] == [inside]
    for bad in ("999", "abc"):
        response = client.get(f"/api/search?q=apple&project_id={bad}")
        assert response.status_code == 404
        assert response.get_json()["error"]["code"] == "unknown_project"
    # The sidebar's search box (HTML, messages mode) honours the same choice.
    page = client.get(
        f"/search?q=apple&mode=messages&project={project['id']}", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    assert "prune the" in page and "bake the" not in page


def test_a_chat_in_a_project_searches_the_project_files(app, client):
    project = client.post("/api/projects", json={"name": "Lab"}).get_json()
    upload = client.post(
        f"/api/projects/{project['id']}/files",
        data={"file": (io.BytesIO(b"The centrifuge runs at 4000 rpm for ten minutes."), "lab.txt")},
        content_type="multipart/form-data",
    )
    assert upload.status_code == 201
    loose = client.post(
        "/api/upload",
        data={"file": (io.BytesIO(b"The centrifuge at home is a salad spinner."), "home.txt")},
        content_type="multipart/form-data",
    )
    assert loose.status_code == 201
    settings = {"rag_scope": "chat"}  # a chat searches its own documents (and its project's)
    in_project = client.post("/api/session", json={"project_id": project["id"]}).get_json()
    elsewhere = client.post("/api/session", json={}).get_json()
    with app.app_context():
        wait_for_indexing(app, timeout=WAIT_SECONDS)
        user_id = db.session.execute(db.text("SELECT user_id FROM chats LIMIT 1")).scalar()

        def found(chat_id: str) -> str:
            result = SEARCH_DOCUMENTS.run(
                {"query": "centrifuge"},
                ToolContext(user_id=user_id, chat_id=chat_id, settings=settings),
            )
            return result.text if isinstance(result, ToolResult) else result

        assert "4000 rpm" in found(in_project["id"]), "the project's file is the chat's own"
        assert "salad spinner" not in found(in_project["id"]), "an unrelated upload is not"
        assert "4000 rpm" not in found(elsewhere["id"]), "a chat outside the project cannot"
