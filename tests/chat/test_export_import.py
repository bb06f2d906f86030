"""Export (md, txt, json, html) and import of chats: content, safety, round trip, isolation."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser

import pytest
from import_support import form_import, imported_chat, run_import
from markupsafe import escape
from server_wait import HANG_SECONDS

HOSTILE = "<img src=x onerror=alert(1)> <script>alert(1)</script> [x](javascript:alert(1))"
UNICODE = "Grüße, 世界 👋 — ünïcødé"


def build_chat(app, user_id: int, *, title: str = "Trip plan", hostile: str = HOSTILE) -> str:
    """A transcript with every kind of message; returns the chat id."""
    from numi.extensions import db
    from numi.models import Attachment, Chat, Message, utcnow

    with app.app_context():
        chat = Chat(user_id=user_id, title=title, model="model-x")
        chat.settings = {"system_prompt": "Be brief. " + hostile, "temperature": 0.5}
        attachment = Attachment(
            user_id=user_id,
            filename="report " + hostile + ".pdf",
            mime="application/pdf",
            size=2048,
            sha256="ab" * 32,
            storage_path="x/y",
        )
        db.session.add_all([chat, attachment])
        db.session.flush()
        rows = [
            Message(
                chat_id=chat.id, role="user", content=f"{UNICODE}\n{hostile}", request_id="req-1"
            ),
            Message(
                chat_id=chat.id,
                role="assistant",
                content="Let me look that up.",
                reasoning_content="Thinking about " + hostile,
            ),
            Message(
                chat_id=chat.id, role="tool", tool_call_id="call_1", content="sunny " + hostile
            ),
            Message(chat_id=chat.id, role="tool", tool_call_id="call_2", content="no such file"),
            Message(chat_id=chat.id, role="assistant", content="**Sunny** in Paris. " + hostile),
            Message(chat_id=chat.id, role="user", content="gone", deleted_at=utcnow()),
        ]
        rows[0].content_parts = [{"type": "attachment", "id": attachment.id}]
        rows[1].reasoning_details = [
            {"type": "reasoning.text", "text": "Thinking about " + hostile}
        ]
        rows[1].tool_calls = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a"}'},
            },
        ]
        rows[1].meta = {"model": "model-x", "usage": {"input_tokens": 10, "output_tokens": 5}}
        rows[2].meta = {"tool": "weather", "ok": True}
        rows[3].meta = {"tool": "read_file", "ok": False}
        rows[4].citation_sources = [
            {"url": "https://example.org/paris", "title": "Paris " + hostile},
            {"url": "javascript:alert(1)", "title": "bad link"},
        ]
        rows[4].meta = {"model": "model-x", "finish_reason": "stop"}
        for row in rows:
            db.session.add(row)
            db.session.flush()
        db.session.commit()
        return chat.id


def counts(app) -> tuple[int, int]:
    from sqlalchemy import func, select

    from numi.extensions import db
    from numi.models import Chat, Message

    with app.app_context():
        return (
            db.session.execute(select(func.count(Chat.id))).scalar_one(),
            db.session.execute(select(func.count(Message.id))).scalar_one(),
        )


def export(client, chat_id: str, fmt: str):
    response = client.get(f"/api/session/{chat_id}/export?fmt={fmt}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Disposition"].startswith("attachment;")
    return response


# --- export content ------------------------------------------------------------------------


def test_markdown_and_text_exports_are_readable(multi_app, users, client_a):
    chat_id = build_chat(multi_app, users["a"].id)
    md = export(client_a, chat_id, "md").get_data(as_text=True)
    assert md.startswith("# Trip plan\n")
    assert UNICODE in md and "## You" in md and "## Assistant · model-x" in md
    assert "[attachment: report " in md and "(2.0 KB)]" in md
    assert "**Reasoning**" in md and "> Thinking about" in md
    assert "**Tool call:** `weather` (call_1)" in md and '"city": "Paris"' in md
    assert "sunny" in md and "**Result** (failed)" in md
    assert "1. Paris" in md and "<https://example.org/paris>" in md
    assert "2. bad link" in md and "javascript:alert(1)>" not in md  # shown as text, not a link
    assert "gone" not in md  # deleted messages stay out

    txt = export(client_a, chat_id, "txt").get_data(as_text=True)
    assert txt.startswith("Trip plan\n=========")
    assert "[You]" in txt and "Reasoning:\n    Thinking about" in txt
    assert "Tool call: read_file (call_2)" in txt and "Result (failed):\n    no such file" in txt
    assert "[attachment: report " in txt and "gone" not in txt


def test_export_filename_and_format_errors(multi_app, users, client_a):
    chat_id = build_chat(
        multi_app, users["a"].id, title='../../etc/passwd "x"; <b>Ünï</b>\r\nSet-Cookie: a=b'
    )
    response = export(client_a, chat_id, "json")
    disposition = response.headers["Content-Disposition"]
    assert (
        "\r" not in disposition
        and "\n" not in disposition
        and "/" not in disposition.split("filename", 1)[1]
    )
    assert re.search(r'filename="[\w .-]+\.json"', disposition)
    assert response.mimetype == "application/json"

    bad = client_a.get(f"/api/session/{chat_id}/export?fmt=pdf")
    assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "invalid_format"


def test_json_export_is_a_versioned_document(multi_app, users, client_a):
    chat_id = build_chat(multi_app, users["a"].id)
    doc = export(client_a, chat_id, "json").get_json()
    assert doc["format"] == "numi.chat" and doc["version"] == 1
    assert doc["chat"]["title"] == "Trip plan" and doc["chat"]["model"] == "model-x"
    assert doc["chat"]["settings"]["temperature"] == 0.5
    roles = [m["role"] for m in doc["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    ids = [m["id"] for m in doc["messages"]]
    assert ids == sorted(ids)
    assistant = doc["messages"][1]
    assert assistant["tool_calls"][0]["function"]["name"] == "weather"
    assert assistant["reasoning_details"][0]["type"] == "reasoning.text"
    assert assistant["meta"]["usage"]["output_tokens"] == 5
    assert doc["messages"][4]["citation_sources"][0]["url"] == "https://example.org/paris"
    part = doc["messages"][0]["content_parts"][0]
    assert part["type"] == "attachment" and part["attachment"]["size"] == 2048
    for message in doc["messages"]:
        assert set(message) >= {
            "role",
            "content",
            "content_parts",
            "reasoning_content",
            "reasoning_details",
            "tool_calls",
            "tool_call_id",
            "citation_sources",
            "meta",
            "request_id",
            "created_at",
        }


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data


def test_html_export_is_self_contained_and_escapes_every_hostile_input(sqlite_app, xss):
    """One chat per hostile input (in the title, filename, text, reasoning, tool output, sources)."""
    from numi.chat.export import export_chat
    from numi.extensions import db
    from numi.models import User

    with sqlite_app.app_context():
        user = User(username="h")
        db.session.add(user)
        db.session.commit()
        user_id = user.id
    for hostile in xss.inputs:
        chat_id = build_chat(sqlite_app, user_id, title=hostile, hostile=hostile)
        with sqlite_app.app_context():
            html = export_chat(user_id, chat_id, "html").body
        # The template's own <meta>, <style> and the collapsible <details> are the only
        # elements outside the sanitiser's allow-list: system prompt, reasoning, two tool calls.
        problems = xss.html_problems(html)
        assert sorted(set(problems)) == ["<details>", "<meta>", "<style>"], (hostile, problems)
        assert problems.count("<details>") == 4 and problems.count("<style>") == 1, hostile
        parser = _Tags()
        parser.feed(html)
        tags = {tag for tag, _ in parser.tags}
        assert not tags & {
            "script",
            "link",
            "img",
            "iframe",
            "object",
            "embed",
            "base",
            "form",
            "svg",
        }, hostile
        for tag, attrs in parser.tags:
            assert not {"src", "srcset", "action", "style"} & set(attrs), (hostile, tag, attrs)
            assert not any(name.startswith("on") for name in attrs), (hostile, tag, attrs)
        assert "url(" not in parser.style and "@import" not in parser.style
        assert "<script" not in html.lower()
        # Untrusted plain text is escaped where it is shown verbatim.
        assert f'<p class="user-text">{escape(UNICODE)}\n{escape(hostile)}</p>' in html
        assert f"<title>{escape(hostile)}</title>" in html
        assert f"<pre>sunny {escape(hostile)}</pre>" in html


def test_html_export_uses_the_app_markdown_renderer(multi_app, users, client_a):
    from numi.render import render_markdown

    chat_id = build_chat(multi_app, users["a"].id)
    response = export(client_a, chat_id, "html")
    html = response.get_data(as_text=True)
    assert response.mimetype == "text/html"
    assert str(render_markdown("**Sunny** in Paris. " + HOSTILE)) in html
    assert (
        '<details class="reasoning">' in html
        and "<summary>Tool call: read_file (failed)</summary>" in html
    )
    assert '<a href="https://example.org/paris" rel="noopener noreferrer nofollow">' in html
    assert 'href="javascript' not in html and "<li>bad link</li>" in html
    assert "[attachment: report " in html and "(2.0 KB)]</li>" in html


def test_user_b_cannot_export_user_a_chat(multi_app, users, client_a, client_b):
    chat_id = build_chat(multi_app, users["a"].id)
    for fmt in ("md", "txt", "json", "html"):
        response = client_b.get(f"/api/session/{chat_id}/export?fmt={fmt}")
        assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found"
    with_token = multi_app.test_client().get(
        f"/api/session/{chat_id}/export?fmt=json", headers=users["b"].auth_header
    )
    assert with_token.status_code == 404


# --- import --------------------------------------------------------------------------------

COMPARED = (
    "role",
    "content",
    "content_parts",
    "reasoning_content",
    "reasoning_details",
    "tool_calls",
    "tool_call_id",
    "citation_sources",
    "meta",
    "request_id",
)


def _transcript(app, chat_id: str) -> list[dict]:
    from numi.chat.export import load_transcript
    from numi.extensions import db
    from numi.models import Chat

    with app.app_context():
        return [
            {k: m.to_dict()[k] for k in COMPARED}
            for m in load_transcript(db.session.get(Chat, chat_id))
        ]


def test_json_round_trip_gives_the_same_transcript(multi_app, users, client_a):
    chat_id = build_chat(multi_app, users["a"].id)
    doc = export(client_a, chat_id, "json").get_json()
    new = imported_chat(client_a, doc)
    assert new["id"] != chat_id
    assert (new["title"], new["model"], new["settings"]) == (
        "Trip plan",
        "model-x",
        doc["chat"]["settings"],
    )
    assert _transcript(multi_app, new["id"]) == _transcript(multi_app, chat_id)
    # Exporting the copy gives the same document, ids and export time aside.
    again = export(client_a, new["id"], "json").get_json()

    def strip(d):  # ids differ; the tree is compared by positions
        position = {m["id"]: i for i, m in enumerate(d["messages"])}
        return [
            {**{k: v for k, v in m.items() if k != "id"}, "parent_id": position.get(m["parent_id"])}
            for m in d["messages"]
        ]

    assert strip(again) == strip(doc)
    assert [m["id"] for m in again["messages"]] == sorted(m["id"] for m in again["messages"])
    assert (
        client_a.get(f"/api/history/{new['id']}").get_json()["messages"][2]["tool_call_id"]
        == "call_1"
    )


def test_an_import_never_brings_an_approval_policy(multi_app, users, client_a):
    """A file must not decide which tool calls run without asking."""
    chat_id = build_chat(multi_app, users["a"].id)
    doc = export(client_a, chat_id, "json").get_json()
    doc["chat"]["settings"]["tool_policy"] = {"bash": "auto", "write_file": "auto"}
    assert "tool_policy" not in imported_chat(client_a, doc)["settings"]


def test_import_into_another_account_never_references_foreign_attachments(
    multi_app, users, client_a, client_b
):
    chat_id = build_chat(multi_app, users["a"].id)
    doc = export(client_a, chat_id, "json").get_json()
    new_id = imported_chat(client_b, doc)["id"]
    first = _transcript(multi_app, new_id)[0]
    assert first["content_parts"] == [
        {"type": "text", "text": f"[attachment not available: report {HOSTILE}.pdf]"}
    ]
    assert client_a.get(f"/api/session/{new_id}").status_code == 404
    md = export(client_b, new_id, "md").get_data(as_text=True)
    assert "[attachment not available: report" in md


def test_import_by_file_upload_and_from_the_settings_form(app, client):
    me = client.get("/api/sessions")  # creates the single-user mode's user
    assert me.status_code == 200
    from numi.models import User
    from numi.extensions import db
    from sqlalchemy import select

    with app.app_context():
        user_id = db.session.execute(select(User.id)).scalar_one()
    chat_id = build_chat(app, user_id)
    body = export(client, chat_id, "json").get_data()

    from io import BytesIO

    api = run_import(
        client, data={"file": (BytesIO(body), "chat.json")}, content_type="multipart/form-data"
    )
    assert api["state"] == "done", api

    page = client.get("/settings/import").get_data(as_text=True)
    assert 'action="/import"' in page and 'enctype="multipart/form-data"' in page
    form = form_import(client, {"file": (BytesIO(body), "chat.json")})
    assert form.status_code == 303 and form.headers["Location"].startswith("/c/")
    view = client.get(form.headers["Location"]).get_data(as_text=True)
    assert "Trip plan" in view and 'class="chat-export' in view and "fmt=html" in view

    before = counts(app)
    bad = form_import(client, {"file": (BytesIO(b"{not json"), "x.json")})
    assert bad.status_code == 200 and "not valid JSON" in bad.get_data(as_text=True)
    assert "<code>invalid_import</code>" in bad.get_data(as_text=True)
    assert counts(app) == before


def _good_doc() -> dict:
    return {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "T", "model": None, "settings": {}},
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ],
    }


def _broken(change) -> dict:
    doc = _good_doc()
    change(doc)
    return doc


MALFORMED = {
    "not an object": [1, 2, 3],
    "wrong format tag": _broken(lambda d: d.update(format="other.chat")),
    "future version": _broken(lambda d: d.update(version=99)),
    "chatgpt export": [{"title": "x", "mapping": {}}],
    "missing messages": _broken(lambda d: d.pop("messages")),
    "missing chat": _broken(lambda d: d.pop("chat")),
    "missing role": _broken(lambda d: d["messages"][0].pop("role")),
    "unknown role": _broken(lambda d: d["messages"][0].update(role="admin")),
    "content not text": _broken(lambda d: d["messages"][0].update(content={"x": 1})),
    "messages not a list": _broken(lambda d: d.update(messages={"0": {}})),
    "message not an object": _broken(lambda d: d["messages"].append("hello")),
    "meta not an object": _broken(lambda d: d["messages"][3].update(meta=[1])),
    "bad part": _broken(
        lambda d: d["messages"][0].update(content_parts=[{"type": "attachment", "id": "1"}])
    ),
    "call without id": _broken(lambda d: d["messages"][1]["tool_calls"][0].pop("id")),
    "tool calls on a user message": _broken(
        lambda d: d["messages"][0].update(tool_calls=[{"id": "z"}])
    ),
    "bad setting": _broken(lambda d: d["chat"].update(settings={"temperature": 9})),
    "bad time": _broken(lambda d: d["messages"][0].update(created_at="yesterday")),
    "tool result without its call": _broken(
        lambda d: d["messages"].append({"role": "tool", "tool_call_id": "nope", "content": "x"})
    ),
    "tool result before its call": _broken(
        lambda d: d["messages"].insert(0, {"role": "tool", "tool_call_id": "c1", "content": "x"})
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_import_is_refused_and_writes_nothing(multi_app, users, client_a, name):
    before = counts(multi_app)
    job = run_import(client_a, json=MALFORMED[name])
    assert job["state"] == "failed", (name, job)
    error = job["error"]
    assert error["code"] == "invalid_import" and error["message"]
    assert counts(multi_app) == before


def test_malformed_bodies_and_the_good_document(multi_app, users, client_a):
    before = counts(multi_app)
    for body in (b"", b"{not json", b"\xff\xfe", b'"just a string"'):
        job = run_import(client_a, data=body, content_type="application/json")
        assert job["error"]["code"] == "invalid_import", (body, job)
    assert run_import(client_a, data=b"", content_type="application/json")["status"] == 400
    empty_form = client_a.post("/api/import", data={}, content_type="multipart/form-data")
    assert empty_form.status_code == 400
    assert counts(multi_app) == before

    ok = run_import(client_a, json=_good_doc())
    assert ok["state"] == "done", ok
    assert counts(multi_app) == (before[0] + 1, before[1] + 4)


# --- CLI -----------------------------------------------------------------------------------


def test_cli_export_all_writes_one_file_per_live_chat(sqlite_app, tmp_path, cli_host):
    from numi.extensions import db
    from numi.models import Chat, User, utcnow

    with sqlite_app.app_context():
        alice, bob = User(username="alice"), User(username="bob")
        db.session.add_all([alice, bob])
        db.session.commit()
        ids = (alice.id, bob.id)
    first = build_chat(sqlite_app, ids[0], title="Same title")
    build_chat(sqlite_app, ids[0], title="Same title")
    build_chat(sqlite_app, ids[1], title="Bob's chat")
    gone = build_chat(sqlite_app, ids[0], title="Deleted")
    with sqlite_app.app_context():
        db.session.get(Chat, gone).deleted_at = utcnow()
        db.session.commit()

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
    env.update(
        NUMI_DATA_DIR=sqlite_app.config["NUMI_DATA_DIR"],
        NUMI_DATABASE_URL=sqlite_app.config["NUMI_DATABASE_URL"],
        NUMI_AUTO_ENDPOINTS="0",
    )
    out = tmp_path / "backup"
    # The real command group in the worker's command host: a process start each cost this
    # test 23 s for its three commands in a loaded run (issue 36).
    result = cli_host.run(["export", "--all", str(out)], env=env, input=None, timeout=HANG_SECONDS)
    assert result.returncode == 0, result.stderr
    assert "Exported 3 chats" in result.stdout
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json"))
    assert len(files) == 3 and sum(f.startswith("alice/Same title-") for f in files) == 2
    assert any(f.startswith("bob/Bob s chat-") for f in files)
    doc = json.loads((out / "alice" / f"Same title-{first[:8]}.json").read_text(encoding="utf-8"))
    assert doc["format"] == "numi.chat" and len(doc["messages"]) == 5

    only_bob = cli_host.run(
        ["export", "--all", str(tmp_path / "md"), "--user", "bob", "--fmt", "md"],
        env=env,
        input=None,
        timeout=HANG_SECONDS,
    )
    assert only_bob.returncode == 0, only_bob.stderr
    assert [p.name for p in (tmp_path / "md").rglob("*.md")] and not (
        tmp_path / "md" / "alice"
    ).exists()
    nobody = cli_host.run(
        ["export", "--all", str(tmp_path / "x"), "--user", "nobody"],
        env=env,
        input=None,
        timeout=HANG_SECONDS,
    )
    assert nobody.returncode != 0 and "No user 'nobody'" in nobody.stderr


def test_an_imported_message_is_no_longer_than_a_sent_one(multi_app, users, client_a):
    """Issue 28, item 5: a 2 MB imported message froze every user on each view of its chat."""
    chat_id = build_chat(multi_app, users["a"].id)
    doc = export(client_a, chat_id, "json").get_json()
    limit = multi_app.config["NUMI_MAX_MESSAGE_CHARS"]
    before = client_a.get("/api/sessions").get_json()["sessions"]
    for field in ("content", "reasoning_content"):
        doc["messages"][1][field] = "x" * (limit + 1)
        job = run_import(client_a, json=doc)
        assert job["state"] == "failed", job
        error = job["error"]
        assert (
            error["code"] == "invalid_import"
            and f"messages[1].{field} is too long" in error["message"]
        )
        doc["messages"][1][field] = "x" * limit if field == "content" else None
    assert client_a.get("/api/sessions").get_json()["sessions"] == before, "nothing was imported"
    assert run_import(client_a, json=doc)["state"] == "done", "a message at the limit imports"
