"""Templates get their data from the views: a chat page costs the same number of SQL
statements whatever the number of messages with attachments and checkpoints it shows
(issue 36). Runs on SQLite and PostgreSQL (the `client` fixtures are parametrised)."""

from __future__ import annotations

from numi.extensions import db
from numi.models import Attachment, Chat, Checkpoint, Message


def _add_messages(app, chat_id: str, first: int, count: int) -> None:
    """`count` questions with a file each and their answers, with a checkpoint after each."""
    with app.app_context():
        chat = db.session.get(Chat, chat_id)
        for n in range(first, first + count):
            file = Attachment(
                user_id=chat.user_id,
                filename=f"notes-{n}.txt",
                mime="text/plain",
                size=10 + n,
                sha256=f"{n:064d}",
                storage_path=f"uploads/{n}",
            )
            db.session.add(file)
            db.session.flush()
            question = Message(chat_id=chat_id, role="user", content=f"question {n}")
            question.content_parts = [{"type": "attachment", "id": file.id}]
            answer = Message(chat_id=chat_id, role="assistant", content=f"answer {n}")
            db.session.add_all([question, answer])
            db.session.flush()
            db.session.add(
                Checkpoint(
                    chat_id=chat_id,
                    through_message_id=answer.id,
                    summary=f"summary {n}",
                    messages_before=2,
                    messages_after=1,
                    tokens_before=20,
                    tokens_after=10,
                )
            )
        db.session.commit()


def test_a_chat_page_costs_the_same_statements_for_2_or_12_messages_with_files(
    app, client, statements_of
):
    chat_id = client.post("/api/session", json={"title": "files"}).get_json()["id"]
    pages = []

    def chat_page() -> None:
        response = client.get(f"/c/{chat_id}")
        assert response.status_code == 200
        pages.append(response.get_data(as_text=True))

    _add_messages(app, chat_id, 0, 1)
    few = statements_of(chat_page)
    page = pages[-1]
    assert "notes-0.txt" in page and "summary 0" in page  # what the count is about is drawn
    _add_messages(app, chat_id, 1, 5)
    many = statements_of(chat_page)
    page = pages[-1]
    assert "notes-5.txt" in page and "summary 5" in page
    assert many == few, f"{few} statements for 2 messages, {many} for 12"


# The template helpers that ran queries; the views pass their data now (pure formatting
# helpers, such as `human_size` or `chat_group`, stay).
QUERYING_HELPERS = (
    "sidebar_projects",
    "chat_tool_choices",
    "voice_endpoints",
    "voice_preferences",
    "user_documents",
    "user_mcp_servers",
    "message_attachments",
    "chat_checkpoints",
)


def test_templates_have_no_helper_that_queries(app):
    assert [name for name in QUERYING_HELPERS if name in app.jinja_env.globals] == []
