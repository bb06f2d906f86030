"""Two users in multi-user mode: user B gets 404 for every route that names user A's objects.

The table is built from the app's url_map, so a new route with an id in its path is covered
the day it is added. A route argument this file does not know fails the test: add it to
`ID_ARGUMENTS` (how to get user A's object of that kind) before shipping the route.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from sqlalchemy import text

from numi.extensions import db
from numi.knowledge.index import backend, fts_rowid
from numi.web.pages.settings import SECTIONS
from numi.models import (
    DocumentChunk,
    ApiKey,
    Attachment,
    Chat,
    Endpoint,
    ImportJob,
    McpServer,
    Memory,
    ModelAlias,
    Message,
    Project,
    ProjectFile,
    Prompt,
    QueuedMessage,
    Budget,
    Share,
    Task,
    utcnow,
)

WS_HEADERS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}
# Route arguments that name an object, and the key of user A's object of that kind.
ID_ARGUMENTS = {
    "chat_id": "chat_id",
    "endpoint_id": "endpoint_id",
    "attachment_id": "attachment_id",
    "message_id": "message_id",
    "server_id": "server_id",
    "item_id": "item_id",
    "prompt_id": "prompt_id",
    "project_id": "project_id",
    "memory_id": "memory_id",
    "job_id": "job_id",
    "key_id": "key_id",
    "share_id": "share_id",
    "task_id": "task_id",
    "budget_id": "budget_id",
    "alias_id": "alias_id",
    "number": "source_number",
}
# Routes whose argument names a particular one of user A's objects: (endpoint, argument) ->
# the key of that object (Show as markdown renders an answer, not a question).
SPECIFIC_ARGUMENTS = {
    ("transcript.message_markdown", "message_id"): "answer_id",
    ("library.answer_source", "message_id"): "answer_id",
}
# Route arguments that name no owned object (nothing to isolate).
# A settings section names no object; a share link's token is the capability itself, open to
# whoever holds it (tests/web/test_shares.py), and the places of a shared answer's artifact
# (`index`, `n`) are places within that share.
FREE_ARGUMENTS = {"filename", "section", "token", "index", "n"}
# Bodies that make a state-changing request valid apart from the foreign id, so a 404
# cannot come from a validation error that happens first.
BODIES = {
    "transcript.edit": {"text": "stolen"},
    "transcript.api_edit": {"text": "stolen"},
    "pages.rename": {"title": "stolen"},
    "pages.chat_settings": {"system_prompt": "stolen"},
    "api.update_session": {"title": "stolen"},
    "api.update_endpoint": {"name": "stolen"},
    "followups.edit": {"message": "stolen"},
    "followups.edit_form": {"message": "stolen"},
    "prompts.edit": {"command": "stolen", "title": "stolen", "text": "stolen"},
    "prompts.one_json": {"title": "stolen"},
    "projects.update_project": {"name": "stolen"},
    "project_pages.edit_project": {"name": "stolen"},
    "projects.update_memory": {"text": "stolen"},
    "project_pages.edit_memory": {"text": "stolen"},
    "project_pages.move_chat": {"project_id": ""},
    "shares.create_share": {"display_name": "stolen"},
    "shares.share_form": {"display_name": "stolen"},
}


@pytest.fixture
def owned(multi_app, users):
    """User A's chat (with a message) and private endpoint."""
    a = users["a"]
    with multi_app.app_context():
        endpoint = Endpoint(
            user_id=a.id,
            name="alice endpoint",
            kind="openai_chat",
            base_url="http://127.0.0.1:9/v1",
        )
        endpoint.models = [{"id": "m"}]  # a fresh cached list: no network needed
        endpoint.models_fetched_at = utcnow()
        db.session.add(endpoint)
        db.session.flush()
        chat = Chat(user_id=a.id, title="alice secret chat", endpoint_id=endpoint.id, model="m")
        db.session.add(chat)
        db.session.flush()
        message = Message(chat_id=chat.id, role="user", content="alice private message")
        db.session.add(message)
        db.session.flush()
        answer = Message(chat_id=chat.id, role="assistant", content="alice private answer")
        db.session.add(answer)
        # A real 1x1 PNG on disk, so user A's download and thumbnail routes answer (the control).
        png = _tiny_png()
        path = Path(multi_app.config["NUMI_DATA_DIR"]) / "uploads" / "00" / ("0" * 64)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        attachment = Attachment(
            user_id=a.id,
            filename="alice.png",
            mime="image/png",
            size=len(png),
            sha256="0" * 64,
            storage_path="uploads/00/" + "0" * 64,
        )
        db.session.add(attachment)
        db.session.flush()
        # A passage of it that user A's answer cites (Sources → the passage panel).
        # Keyed as the indexer keys it on FTS5, so that it is there to be refused.
        keyed = backend() == "fts5"
        db.session.execute(
            text(
                "INSERT INTO fts_document_chunks (title, content, attachment_id, user_id, chunk"
                + (", rowid" if keyed else "")
                + ") VALUES ('alice.png', 'alice private passage', :a, :u, 0"
                + (", :r)" if keyed else ")")
            ),
            {"a": attachment.id, "u": a.id, "r": fts_rowid(attachment.id, 0)},
        )
        db.session.add(DocumentChunk(attachment_id=attachment.id, chunk=0, user_id=a.id))
        answer.citation_sources = [
            {"n": 1, "title": "alice.png", "url": None, "attachment_id": attachment.id, "chunk": 0}
        ]
        # A closed loopback port: user A's "test" answers quickly with a connection error.
        server = McpServer(
            user_id=a.id, name="alice-tools", transport="http", url="http://127.0.0.1:9/mcp"
        )
        db.session.add(server)
        # A follow-up waiting in user A's queue.
        item = QueuedMessage(
            chat_id=chat.id, user_id=a.id, content="alice queued", request_id="q-alice"
        )
        db.session.add(item)
        # A saved prompt of user A's.
        prompt = Prompt(
            user_id=a.id, command="alice-cmd", title="alice prompt", text="alice private prompt"
        )
        db.session.add(prompt)
        # A project of user A's, with the attachment as its file and a memory.
        project = Project(user_id=a.id, name="alice project", instructions="alice rules")
        db.session.add(project)
        db.session.flush()
        db.session.add(
            ProjectFile(attachment_id=attachment.id, project_id=project.id, user_id=a.id)
        )
        memory = Memory(user_id=a.id, project_id=project.id, text="alice private memory")
        db.session.add(memory)
        # An import of user A's that made the chat.
        job = ImportJob(user_id=a.id, state="done", running=None, kind="chats", total=2, done=2)
        job.result = {"chat": {"id": chat.id, "title": chat.title}, "chats": []}
        db.session.add(job)
        # An API key of user A's (/v1).
        key = ApiKey(user_id=a.id, name="alice key", prefix="numi-sk-alic", key_hash="a" * 64)
        db.session.add(key)
        # A share link of user A's chat.
        share = Share(
            user_id=a.id, chat_id=chat.id, token_hash="0" * 64, title="alice", display_name="A"
        )
        db.session.add(share)
        # A scheduled task of user A's (its Run now starts a run in A's own chat).
        task = Task(
            user_id=a.id,
            name="alice task",
            prompt="alice private task",
            endpoint_id=endpoint.id,
            model="m",
            schedule="every hour",
            cron="0 * * * *",
            timezone="UTC",
        )
        db.session.add(task)
        # A token budget of user A's.
        budget = Budget(
            user_id=a.id,
            scope="user",
            period="month",
            timezone="UTC",
            unit="tokens",
            hard_cap=1000.0,
            period_start=utcnow(),
        )
        db.session.add(budget)
        # A model alias of user A's (gateway clients' names).
        alias = ModelAlias(user_id=a.id, name="alice-fast")
        alias.routes = [{"endpoint_id": endpoint.id, "model": "m"}]
        db.session.add(alias)
        db.session.commit()
        return {
            "alias_id": alias.id,
            "key_id": key.id,
            "project_id": project.id,
            "memory_id": memory.id,
            "chat_id": chat.id,
            "endpoint_id": endpoint.id,
            "attachment_id": attachment.id,
            "message_id": message.id,
            "answer_id": answer.id,
            "source_number": 1,
            "server_id": server.id,
            "item_id": item.id,
            "prompt_id": prompt.id,
            "job_id": job.id,
            "share_id": share.id,
            "task_id": task.id,
            "budget_id": budget.id,
        }


def _tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def id_routes(app):
    """(rule, method, endpoint) for every route whose path names an owned object."""
    routes = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("gateway."):
            # /v1 takes API keys, never these clients' sessions or tokens; one user's key
            # against another's models and chats is tests/gateway/test_gateway_keys.py.
            continue
        arguments = set(rule.arguments) - FREE_ARGUMENTS
        if not arguments:
            continue
        unknown = arguments - set(ID_ARGUMENTS)
        assert not unknown, (
            f"route {rule.rule} has argument(s) {unknown} that tests/web/test_isolation.py does not "
            "know: add them to ID_ARGUMENTS so user B's access to user A's objects is tested"
        )
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            routes.append((rule, method))
    return routes


def _url(rule, ids) -> str:
    return rule.build(
        {
            name: ids[SPECIFIC_ARGUMENTS.get((rule.endpoint, name), ID_ARGUMENTS[name])]
            for name in rule.arguments
            if name in ID_ARGUMENTS
        }
    )[1]


def _state(app, ids):
    with app.app_context():
        db.session.expire_all()
        chat = db.session.get(Chat, ids["chat_id"])
        endpoint = db.session.get(Endpoint, ids["endpoint_id"])
        return (
            chat.title,
            chat.settings_json,
            chat.deleted_at,
            endpoint.name,
            endpoint.deleted_at,
            endpoint.models_json,
            db.session.query(Message).count(),
            [q.content for q in db.session.query(QueuedMessage)],
            [(p.command, p.title, p.text) for p in db.session.query(Prompt)],
            [(p.name, p.instructions) for p in db.session.query(Project)],
            [m.text for m in db.session.query(Memory)],
            db.session.query(ProjectFile).count(),
            [(s.chat_id, s.revoked_at) for s in db.session.query(Share)],
        )


def _request(client, method, url, endpoint_name, headers=None):
    headers = dict(headers or {})
    if endpoint_name.startswith("ws."):
        headers.update(WS_HEADERS)
    body = BODIES.get(endpoint_name)
    if url.startswith("/api/"):
        return client.open(url, method=method, json=body, headers=headers)
    return client.open(url, method=method, data=body, headers=headers)


def test_the_table_covers_the_known_routes(multi_app):
    covered = {rule.endpoint for rule, _ in id_routes(multi_app)}
    # Not vacuous: the routes of the foundation are all found.
    assert {
        "pages.chat_view",
        "pages.older_messages",
        "pages.rename",
        "pages.delete",
        "pages.chat_settings",
        "pages.remove_endpoint",
        "pages.refresh_models",
        "api.get_session",
        "api.update_session",
        "api.delete_session",
        "api.history",
        "api.update_endpoint",
        "api.delete_endpoint",
        "api.endpoint_models",
        "ws.chat_socket",
    } <= covered


@pytest.mark.parametrize("how", ["session", "htmx", "token"])
def test_user_b_gets_404_for_every_route_with_user_a_ids(multi_app, users, owned, client_b, how):
    before = _state(multi_app, owned)
    headers = {"HX-Request": "true"} if how == "htmx" else {}
    client = client_b
    if how == "token":
        client = multi_app.test_client()
        headers = users["b"].auth_header
    checked = 0
    for rule, method in id_routes(multi_app):
        url = _url(rule, owned)
        response = _request(client, method, url, rule.endpoint, headers)
        assert response.status_code == 404, (
            f"{method} {url} as user B ({how}): {response.status_code}"
        )
        body = response.get_data(as_text=True)
        assert "alice" not in body, f"{method} {url} leaked user A's data"
        if url.startswith("/api/"):
            assert response.get_json()["error"]["code"] == "not_found"
        checked += 1
    assert checked >= 15
    assert _state(multi_app, owned) == before, "a request by user B changed user A's data"


def test_user_a_reaches_the_same_routes(multi_app, owned, client_a):
    """The control: the GET routes answer user A, so B's 404s come from the owner check."""
    for rule, method in id_routes(multi_app):
        if method != "GET" or rule.endpoint.startswith("ws."):
            continue
        url = _url(rule, owned)
        response = client_a.get(url, headers={"HX-Request": "true"})
        assert 200 <= response.status_code < 300, f"GET {url} as user A: {response.status_code}"
    assert "alice private message" in client_a.get(f"/c/{owned['chat_id']}").get_data(as_text=True)


def test_lists_and_ids_in_bodies_never_show_user_a_objects(multi_app, users, owned, client_b):
    hx = {"HX-Request": "true"}
    for url, headers in (
        ("/", {}),
        ("/settings", {}),
        *((f"/settings/{section}", {}) for section in SECTIONS),
        ("/chats", hx),
        ("/chats?q=alice", hx),
        ("/api/sessions", {}),
        ("/api/sessions?q=secret", {}),
        ("/api/endpoints", {}),
        ("/api/prompts", {}),
        ("/api/prompts/export", {}),
    ):
        response = client_b.get(url, headers=headers)
        assert response.status_code == 200, url
        assert "alice" not in response.get_data(as_text=True), url

    # Naming A's endpoint in a body is a 404 too, and creates or changes nothing.
    own_chat = client_b.post("/api/session", json={"title": "bob chat"}).get_json()
    before = _state(multi_app, owned)
    endpoint_id = owned["endpoint_id"]
    attempts = [
        client_b.post("/api/session", json={"endpoint_id": endpoint_id}),
        client_b.post("/api/session", data={"name": "x", "selected_endpoint_id": str(endpoint_id)}),
        client_b.patch(f"/api/session/{own_chat['id']}", json={"endpoint_id": endpoint_id}),
        client_b.post("/chats", data={"route": f"{endpoint_id}:m"}),
        client_b.post(f"/c/{own_chat['id']}/settings", data={"route": f"{endpoint_id}:m"}),
    ]
    for response in attempts:
        assert response.status_code == 404, response.get_data(as_text=True)
    assert [s["title"] for s in client_b.get("/api/sessions").get_json()["sessions"]] == [
        "bob chat"
    ]
    assert client_b.get(f"/api/session/{own_chat['id']}").get_json()["endpoint_id"] is None
    assert _state(multi_app, owned) == before


def test_shared_endpoints_are_visible_but_only_admins_change_them(multi_app, users, client_b):
    with multi_app.app_context():
        shared = Endpoint(
            user_id=None, name="Shared one", kind="openai_chat", base_url="http://127.0.0.1:9/v1"
        )
        db.session.add(shared)
        db.session.commit()
        shared_id = shared.id
    assert [e["name"] for e in client_b.get("/api/endpoints").get_json()["endpoints"]] == [
        "Shared one"
    ]
    assert client_b.delete(f"/api/endpoints/{shared_id}").status_code == 404
    assert client_b.patch(f"/api/endpoints/{shared_id}", json={"name": "mine"}).status_code == 404
    assert client_b.post(f"/settings/endpoints/{shared_id}/delete").status_code == 404
    # A non-admin cannot create a shared endpoint either: "shared" is ignored.
    created = client_b.post(
        "/api/endpoints",
        json={
            "name": "try shared",
            "kind": "openai_chat",
            "base_url": "https://api.example.test/v1",
            "shared": True,
        },
    ).get_json()
    assert created["shared"] is False
    assert [e["name"] for e in client_b.get("/api/endpoints").get_json()["endpoints"]] == [
        "Shared one",
        "try shared",
    ]
