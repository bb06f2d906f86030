""" "Use documents" in the chat's settings form and in a project's defaults form (issue 37): each
saves its choice, "" goes back to the default, and the chat follows its project's choice
when it has none of its own."""

from __future__ import annotations

from numi.extensions import db
from numi.knowledge.retrieval import chat_project, use_documents
from numi.models import Chat


def test_the_forms_save_the_choice_and_a_chat_follows_its_project(sqlite_app, sqlite_client):
    client = sqlite_client
    project = client.post("/api/projects", json={"name": "Files"}).get_json()
    chat = client.post("/api/session", json={"project_id": project["id"]}).get_json()

    def mode() -> str:
        with sqlite_app.app_context():
            row = db.session.get(Chat, chat["id"])
            return use_documents(row.settings, chat_project(row.user_id, row.id))

    assert mode() == "auto"
    saved = client.post(f"/p/{project['id']}/defaults", data={"use_documents": "never"})
    assert saved.status_code in (200, 303)
    assert mode() == "never", "a chat without its own choice follows its project's"
    client.post(f"/c/{chat['id']}/settings", data={"use_documents": "ask"})
    assert mode() == "ask"
    page = client.get(f"/c/{chat['id']}").get_data(as_text=True)
    assert '<option value="ask" selected>when the model asks</option>' in page
    client.post(f"/c/{chat['id']}/settings", data={"use_documents": ""})
    assert mode() == "never"
    refused = client.post(f"/c/{chat['id']}/settings", data={"use_documents": "maybe"})
    assert refused.status_code == 400
    assert mode() == "never"
