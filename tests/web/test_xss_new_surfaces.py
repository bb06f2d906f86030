"""The hostile corpus on the surfaces added since the first XSS reviews (issue 34): memories
(Settings and the project page), project names and instructions, tags, file names (a
message's attachment, a project's file), a tool call waiting for approval and its result,
the sidebar's tag filter and the search page.

As in test_xss_pages.py: each page is rendered from the same rows with plain text, then
with a hostile input in every untrusted field. Outside message bodies the two must have the
same element structure (our marks of hidden characters aside); inside `hx-disable`
containers nothing executable or HTMX-active may appear.
"""

from __future__ import annotations

from urllib.parse import quote

from markupsafe import escape

from numi.extensions import db
from numi.web.hidden_characters import hidden_characters
from numi.models import Attachment, Chat, ChatTag, Memory, Message, Project, ProjectFile

PLAIN = "plain words"
HX = {"HX-Request": "true"}


def _setup(app) -> dict:
    with app.app_context():
        from numi.identity import local_user

        user_id = local_user().id
        project = Project(user_id=user_id, name="p")
        db.session.add(project)
        db.session.flush()
        chat = Chat(user_id=user_id, project_id=project.id)
        db.session.add(chat)
        db.session.flush()
        files = [
            Attachment(
                user_id=user_id,
                filename="f",
                mime="text/plain",
                size=1,
                sha256="0" * 64,
                storage_path="x",
            )
            for _ in range(2)
        ]
        db.session.add_all(files)
        db.session.flush()
        db.session.add(
            ProjectFile(attachment_id=files[1].id, project_id=project.id, user_id=user_id)
        )
        messages = [Message(chat_id=chat.id, role=role) for role in ("user", "assistant", "tool")]
        db.session.add_all(messages)
        memories = [
            Memory(user_id=user_id, text="m"),
            Memory(user_id=user_id, project_id=project.id, text="m"),
        ]
        db.session.add_all(memories)
        db.session.add(ChatTag(chat_id=chat.id, tag="t", user_id=user_id))
        db.session.commit()
        return {
            "user": user_id,
            "project": project.id,
            "chat": chat.id,
            "files": [f.id for f in files],
            "messages": [m.id for m in messages],
            "memories": [m.id for m in memories],
        }


def _fill(app, ids, text: str) -> None:
    """Put `text` into every untrusted field of the new surfaces."""
    with app.app_context():
        project = db.session.get(Project, ids["project"])
        project.name = text[:200]
        project.instructions = text
        chat = db.session.get(Chat, ids["chat"])
        chat.title = text[:200]
        for attachment_id in ids["files"]:
            db.session.get(Attachment, attachment_id).filename = text[:255]
        for memory_id in ids["memories"]:
            db.session.get(Memory, memory_id).text = text[:500]
        db.session.execute(db.delete(ChatTag).where(ChatTag.chat_id == chat.id))
        db.session.add(ChatTag(chat_id=chat.id, tag=text[:40], user_id=ids["user"]))
        user, assistant, tool = (db.session.get(Message, i) for i in ids["messages"])
        user.content = text + "\n\nneedle"  # what the search page looks for
        user.content_parts = [
            {"type": "text", "text": text},
            {"type": "attachment", "id": ids["files"][0]},
        ]
        assistant.content = text + " needle"
        assistant.tool_calls = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": ' + _json(text) + "}"},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "remember", "arguments": '{"text": ' + _json(text) + "}"},
            },
        ]
        tool.content = text
        tool.tool_call_id = "call_1"
        tool.meta = {"tool": "bash", "ok": True}
        db.session.commit()


def _json(text: str) -> str:
    import json

    return json.dumps(text)


def _pages(client, ids, text: str) -> dict:
    chat, project = ids["chat"], ids["project"]
    tag = quote(text[:40])
    return {
        "chat page": client.get(f"/c/{chat}"),
        "messages fragment": client.get(f"/c/{chat}/messages", headers=HX),
        "project page": client.get(f"/p/{project}"),
        "settings memory": client.get("/settings/memory"),
        "settings memory fragment": client.get("/settings/memory", headers=HX),
        "sidebar by tag": client.get(f"/chats?tag={tag}", headers=HX),
        "index by tag": client.get(f"/?tag={tag}"),
        "search": client.get("/search?q=needle&mode=messages"),
        "archived": client.get("/archived"),
    }


# The pages' outlines with plain text, made once for the module, as in test_xss_pages.py
# (each test starts from a copy of one database with the same rows; issue 36).
_PLAIN_OUTLINES: dict[str, list] = {}


def test_hostile_text_on_the_new_surfaces_stays_text(sqlite_app, hostile, xss):
    client = sqlite_app.test_client()
    ids = _setup(sqlite_app)
    if not _PLAIN_OUTLINES:
        _fill(sqlite_app, ids, PLAIN)
        _PLAIN_OUTLINES.update(xss.page_outlines(_pages(client, ids, PLAIN)))
    baseline = _PLAIN_OUTLINES

    _fill(sqlite_app, ids, hostile)
    pages = _pages(client, ids, hostile)
    for name, response in pages.items():
        assert response.status_code == 200, name
        outline, inside = xss.page_outline(response.get_data(as_text=True))
        assert outline == baseline[name], f"{name}: the hostile input changed the page structure"
        assert inside == [], f"{name}: {inside}"

    # Not vacuous: the hostile text is on the pages, escaped (hidden characters aside).
    first_line = hostile.strip().split("\n")[0]
    visible = "".join(c for c in first_line if c not in hidden_characters(first_line))[:30]
    for name in ("project page", "settings memory"):
        assert str(escape(visible)) in _visible_text(pages[name]), name


def _visible_text(response) -> str:
    """The page with hidden characters' marks reduced to nothing, as a reader sees it."""
    import re

    html = response.get_data(as_text=True)
    return re.sub(r'<mark class="hidden-char" title="[^"]*">[^<]*</mark>', "", html)
