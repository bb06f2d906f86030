"""A research run in a chat of a project with documents searches them beside the web, through
numi/knowledge's retrieval (the scripted provider through the real OpenAI SDK, the real
index), and cites the passages as sources; another user's documents never appear. On each
backend (SQLite FTS5, and PostgreSQL with NUMI_TEST_DATABASE_URL)."""

from __future__ import annotations

import io

from fixtures.provider import add_scripted_endpoint
from fixtures.users import create_user, sign_in
from research_support import answer, drain, of_type, run_row, search_locally, wait_for
from server_wait import WAIT_SECONDS

from numi.agent.send import Send
from numi.agent.sending import start_turn
from numi.extensions import db, turn_manager
from numi.knowledge.index import wait_for_indexing
from numi.testing import Scenario

PLAN = "1. otters sleep\n2. otters rafts"
NOTES = b"Field notes: sea otters sleep in rafts, holding paws so that they do not drift apart."


def project_chat(client, scripted, files: list[tuple[str, bytes]], **settings) -> str:
    """A chat, on the scripted endpoint, in a new project holding `files`."""
    endpoint_id = add_scripted_endpoint(client, scripted)
    body = {"name": "Otters", "settings": settings}
    project = client.post("/api/projects", json=body).get_json()
    for name, data in files:
        upload = client.post(
            f"/api/projects/{project['id']}/files",
            data={"file": (io.BytesIO(data), name)},
            content_type="multipart/form-data",
        )
        assert upload.status_code == 201, upload.get_json()
    chat = client.post(
        "/api/session",
        json={"endpoint_id": endpoint_id, "model": "fake-model", "project_id": project["id"]},
    )
    assert chat.status_code == 201, chat.get_json()
    return chat.get_json()["id"]


def test_a_projects_documents_are_searched_beside_the_web_and_cited(
    research_app, research_client, run_research, research_web, scripted
):
    chat_id = project_chat(research_client, scripted, [("field-notes.txt", NOTES)])
    wait_for_indexing(research_app, timeout=WAIT_SECONDS)
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Otters hold paws [3] and raft [1]."))
    events = run_research(chat_id)
    steps = [e["data"] for e in of_type(events, "research_step")]
    searched = [s["text"] for s in steps if s["kind"] == "documents"]
    assert searched[0] == "Searched your documents for “otters sleep”: 1 passage."
    assert len(searched) == 2  # each sub-question, the passage kept once
    progress = steps[-1]["progress"]
    [passage] = [s for s in progress["sources"] if s.get("kind") == "document"]
    assert passage["status"] == "read" and passage["url"] is None
    assert passage["title"].startswith("field-notes.txt")
    assert progress["pages_read"] == 2 and progress["passages"] == 1  # not a page
    request = scripted.requests[-1].body["messages"][-1]["content"]
    assert "(from the user's documents)" in request and "holding paws" in request
    assert "Facts about otters-1" in request  # the web beside it
    [report] = answer(research_app, chat_id)
    [cited] = [c for c in report.citation_sources if c.get("attachment_id")]
    assert cited["n"] == passage["n"] and cited["url"] is None
    # Its chip opens the passage, as a search_documents citation's does.
    opened = research_client.get(f"/c/{chat_id}/messages/{report.id}/sources/{cited['n']}")
    assert opened.status_code == 200 and "holding paws" in opened.get_data(as_text=True)
    run, rows = run_row(research_app, chat_id)
    assert run.state["documents_searched"] == [0, 1]
    assert [row.url for row in rows if row.url.startswith("document:")] == [
        f"document:{cited['attachment_id']}:0"
    ]


def test_another_users_documents_never_appear_in_a_run(make_app, research_web, scripted):
    app = make_app(NUMI_AUTH="multi", NUMI_GENERATE_TITLES=False, NUMI_PROVIDER_MAX_RETRIES=0)
    alice = create_user(app, "alice", is_admin=True)  # an admin may use a loopback endpoint
    bob = create_user(app, "bob")
    client_a, client_b = app.test_client(), app.test_client()
    sign_in(client_a, alice)
    sign_in(client_b, bob)
    # A code word, not a number: event ids are numbers (a run's "…4711" was an event id).
    secret = b"Bob's notes: otters sleep in rafts near the vault, whose code is Quetzalbrot."
    bob_project = client_b.post("/api/projects", json={"name": "Bob"}).get_json()
    upload = client_b.post(
        f"/api/projects/{bob_project['id']}/files",
        data={"file": (io.BytesIO(secret), "bob-secret.txt")},
        content_type="multipart/form-data",
    )
    assert upload.status_code == 201
    chat_id = project_chat(client_a, scripted, [("alice-notes.txt", NOTES)])
    search_locally(app, research_web.url)  # the local user's settings, not alice's: no web
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Report [1]."))
    with app.app_context():
        subscription = turn_manager().subscribe(chat_id)[0]
        send = Send.from_payload({"message": "Otters?", "mode": "research"}, app.config)
        start_turn(alice.id, True, chat_id, send)
        wait_for(lambda: not turn_manager().is_running(chat_id), "the run to end")
        events = drain(subscription)
        db.session.remove()
    progress = of_type(events, "research_step")[-1]["data"]["progress"]
    titles = [s["title"] for s in progress["sources"]]
    assert titles and all(t.startswith("alice-notes.txt") for t in titles)
    assert not any("Quetzalbrot" in str(request.body) for request in scripted.requests)
    assert "bob-secret" not in str(events) and "Quetzalbrot" not in str(events)


def test_a_project_that_never_uses_its_documents_is_not_searched(
    research_app, research_client, run_research, research_web, scripted
):
    files = [("field-notes.txt", NOTES)]
    chat_id = project_chat(research_client, scripted, files, use_documents="never")
    wait_for_indexing(research_app, timeout=WAIT_SECONDS)
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Report [1]."))
    events = run_research(chat_id)
    assert not [e for e in of_type(events, "research_step") if e["data"]["kind"] == "documents"]
    assert "holding paws" not in scripted.requests[-1].body["messages"][-1]["content"]
    progress = of_type(events, "research_step")[-1]["data"]["progress"]
    assert progress["pages_read"] == 2 and progress["passages"] == 0
