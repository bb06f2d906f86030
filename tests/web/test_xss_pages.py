"""Hostile titles, endpoint and model names, prompts and messages in the real pages.

Each page is rendered twice from the same rows: once with plain text, once with a hostile
input in every untrusted field. Outside message bodies the two must have the same element
structure (untrusted text never adds an element or attribute); inside message bodies (which
sit in `hx-disable` containers) nothing executable or HTMX-active may appear.
"""

from __future__ import annotations

from markupsafe import escape

from numi.extensions import db
from numi.models import Chat, Endpoint, Message
from numi.web.pages.settings import SECTIONS

PLAIN = "plain words"
HX = {"HX-Request": "true"}


def _fill(app, ids, text: str) -> None:
    """Put `text` into every untrusted field of the chat, its messages and the endpoint."""
    with app.app_context():
        chat = db.session.get(Chat, ids["chat"])
        chat.title = text[:200]
        chat.model = text[:200]
        chat.settings = {"system_prompt": text}
        endpoint = db.session.get(Endpoint, ids["endpoint"])
        endpoint.name = text[:100]
        endpoint.base_url = "http://127.0.0.1:9/v1?q=" + text[:400]
        endpoint.default_model = text[:200]
        endpoint.models = [{"id": text[:200]}, {"id": "other-model"}]
        user, assistant, tool = (db.session.get(Message, i) for i in ids["messages"])
        user.content = text
        assistant.content = text + "\n\n" + text
        assistant.reasoning_content = text
        assistant.tool_calls = [
            {"id": "call_1", "type": "function", "function": {"name": text[:64], "arguments": text}}
        ]
        assistant.meta = {"model": text, "error": {"code": "x", "message": text}}
        tool.content = text
        tool.tool_call_id = text[:200]
        db.session.commit()


def _setup(app) -> dict:
    with app.app_context():
        from numi.identity import local_user

        user_id = local_user().id
        endpoint = Endpoint(
            user_id=user_id, name="e", kind="openai_chat", base_url="http://127.0.0.1:9/v1"
        )
        db.session.add(endpoint)
        db.session.flush()
        chat = Chat(user_id=user_id, endpoint_id=endpoint.id)
        db.session.add(chat)
        db.session.flush()
        messages = [Message(chat_id=chat.id, role=role) for role in ("user", "assistant", "tool")]
        db.session.add_all(messages)
        db.session.commit()
        return {"chat": chat.id, "endpoint": endpoint.id, "messages": [m.id for m in messages]}


def _pages(client, ids) -> dict[str, str]:
    chat = ids["chat"]
    endpoint = ids["endpoint"]
    return {
        "index": client.get("/"),
        "chat page": client.get(f"/c/{chat}"),
        "settings": client.get("/settings"),
        **{f"settings {section}": client.get(f"/settings/{section}") for section in SECTIONS},
        "sidebar fragment": client.get("/chats", headers=HX),
        "chat item fragment": client.get(f"/c/{chat}/item", headers=HX),
        "rename form fragment": client.get(f"/c/{chat}/rename", headers=HX),
        "messages fragment": client.get(f"/c/{chat}/messages", headers=HX),
        "header fragment": client.post(f"/c/{chat}/settings", data={}, headers=HX),
        "endpoint list fragment": client.post(f"/settings/endpoints/{endpoint}/delete", headers=HX),
    }


# The pages' outlines with plain text, made by the first test of the module and compared by
# every one: each test starts from a copy of one database with the same rows, so the plain
# render is the same each time (made once, both XSS files took 51.5 s of CPU instead of 62 s;
# issue 36). Should it ever depend on what the plain render's requests changed, every test
# but the first fails: the outlines differ, loudly.
_PLAIN_OUTLINES: dict[str, list] = {}


def _plain_outlines(app, client, ids, xss) -> dict[str, list]:
    if not _PLAIN_OUTLINES:
        _fill(app, ids, PLAIN)
        outlines = xss.page_outlines(_pages(client, ids))
        with app.app_context():  # undo the endpoint removal of the last request
            db.session.get(Endpoint, ids["endpoint"]).deleted_at = None
            db.session.commit()
        _PLAIN_OUTLINES.update(outlines)  # whole, or not at all
    return _PLAIN_OUTLINES


def test_hostile_text_in_pages_stays_text(sqlite_app, hostile, xss):
    client = sqlite_app.test_client()
    ids = _setup(sqlite_app)
    baseline = _plain_outlines(sqlite_app, client, ids, xss)

    _fill(sqlite_app, ids, hostile)
    pages = _pages(client, ids)
    for name, response in pages.items():
        assert response.status_code == 200, name
        html = response.get_data(as_text=True)
        outline, inside = xss.page_outline(html)
        assert outline == baseline[name], f"{name}: the hostile input changed the page structure"
        assert inside == [], f"{name}: {inside}"

    # Not vacuous: the hostile text is really on the pages, escaped.
    shown = escape(hostile.strip()[:100])
    for name in (
        "index",
        "chat page",
        "sidebar fragment",
        "chat item fragment",
        "rename form fragment",
    ):
        assert shown in pages[name].get_data(as_text=True) or escape(hostile[:100]) in pages[
            name
        ].get_data(as_text=True), name
    chat_page = pages["chat page"].get_data(as_text=True)
    assert f'id="msg-{ids["messages"][1]}-body" class="msg-body md" hx-disable' in chat_page


def test_hostile_input_echoed_in_errors_stays_text(sqlite_client, hostile, xss):
    def attempt(text, headers):
        return sqlite_client.post(
            "/settings/endpoints",
            headers=headers,
            data={"name": "n", "kind": text, "base_url": "http://127.0.0.1:9/v1"},
        )

    for headers in ({}, HX):
        plain = attempt(PLAIN, headers)
        bad = attempt(hostile, headers)
        assert plain.status_code == bad.status_code == 400
        assert (
            xss.page_outline(bad.get_data(as_text=True))[0]
            == xss.page_outline(plain.get_data(as_text=True))[0]
        )
