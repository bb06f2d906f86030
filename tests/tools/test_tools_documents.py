"""Document search: chunking, FTS ranking on a corpus built here, owner scoping, background
indexing with progress, the settings section, and a full turn that does not wait for indexing."""

from __future__ import annotations

import uuid

import gevent
import pytest

from numi.agent.tools import ToolContext, ToolResult
from numi.agent.tools.documents import SEARCH_DOCUMENTS
from numi.knowledge.chunking import chunk_text
from numi.knowledge.index import (
    document_rows,
    ensure_indexed,
    schedule_indexing,
    search,
    wait_for_indexing,
)
from numi.extensions import db
from numi.models import Attachment, DocumentIndex, User
from server_wait import WAIT_SECONDS

CORPUS = {
    "gardening.txt": "Tomatoes need full sun and regular watering.\n\nPrune the side shoots of tomato plants weekly.",
    "biology.txt": (
        "Photosynthesis happens in the chloroplast. Chlorophyll absorbs light, and the plant turns "
        "carbon dioxide and water into glucose and oxygen.\n\nMitochondria release energy from glucose."
    ),
    "cooking.txt": "A tomato sauce simmers for an hour. Add basil, garlic and olive oil.",
    "history.txt": "The printing press spread books across Europe in the fifteenth century.",
}


def _user(name: str) -> int:
    user = User(username=f"{name}-{uuid.uuid4().hex[:6]}")
    # Full text only: these tests rank by words (meaning search is tests/knowledge's). The
    # first load of the local embedding model holds the one CPU thread of a 2-core machine,
    # and the other documents' chunking queues behind it: twice in CI, past the deadline.
    user.documents = {"embedding": "none"}
    db.session.add(user)
    db.session.commit()
    return user.id


def _document(user_id: int, filename: str, body: str | None) -> int:
    attachment = Attachment(
        user_id=user_id,
        filename=filename,
        mime="text/plain",
        size=len(body or ""),
        sha256=uuid.uuid4().hex,
        storage_path=f"/nonexistent/{filename}",
        extracted_text=body,
    )
    db.session.add(attachment)
    db.session.commit()
    return attachment.id


def _index_all(app, ids):
    for attachment_id in ids:
        schedule_indexing(app, attachment_id)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    states = {a: db.session.get(DocumentIndex, a) for a in ids}
    assert all(s is not None and s.status == "done" for s in states.values()), {
        a: (s.status, s.error) if s else None for a, s in states.items()
    }


def test_chunks_follow_paragraphs_and_overlap():
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(12)]
    chunks = chunk_text("\n\n".join(paragraphs), size=600, overlap=100)
    assert len(chunks) > 3
    assert all(len(c) <= 600 + 100 + 5 for c in chunks)
    for earlier, later in zip(chunks, chunks[1:]):
        # the next chunk starts with the end of the previous one
        assert earlier[-40:].split()[-1] in later[:120]
    assert all(f"Paragraph {i}" in "".join(chunks) for i in range(12))
    one_long = chunk_text("x" * 5000, size=1000, overlap=0)
    assert [len(c) for c in one_long] == [1000] * 5
    assert chunk_text("") == [] and chunk_text("   \n\n  ") == []


def test_most_relevant_passage_ranks_first_and_search_is_owner_scoped(app):
    with app.app_context():
        alice, bob = _user("alice"), _user("bob")
        ids = {name: _document(alice, name, body) for name, body in CORPUS.items()}
        bob_doc = _document(
            bob, "bob-secret.txt", "Chlorophyll photosynthesis notes of Bob, private."
        )
        _index_all(app, [*ids.values(), bob_doc])

        hits = search(alice, "how does chlorophyll photosynthesis work")
        assert hits and hits[0]["attachment_id"] == ids["biology.txt"]
        assert all(h["attachment_id"] != bob_doc for h in hits), "never another user's documents"
        tomato = search(alice, "tomato")
        assert {h["attachment_id"] for h in tomato} == {ids["gardening.txt"], ids["cooking.txt"]}
        assert search(alice, "printing press Europe")[0]["attachment_id"] == ids["history.txt"]
        # Query syntax is words only: FTS operators and quotes cannot break the query.
        assert search(alice, 'tomato" OR NEAR(* -- ') != []
        assert search(alice, "zebra unicorn") == []
        assert [h["attachment_id"] for h in search(bob, "chlorophyll")] == [bob_doc]
        # Scoped to a chat's attachments.
        scoped = search(alice, "tomato", attachment_ids=[ids["cooking.txt"]])
        assert [h["attachment_id"] for h in scoped] == [ids["cooking.txt"]]
        assert search(alice, "tomato", attachment_ids=[]) == []


def test_tool_returns_passages_as_citation_sources(app):
    with app.app_context():
        alice = _user("alice")
        doc = _document(alice, "biology.txt", CORPUS["biology.txt"])
        _index_all(app, [doc])
        result = SEARCH_DOCUMENTS.run(
            {"query": "chlorophyll"}, ToolContext(user_id=alice, chat_id="x")
        )
        assert isinstance(result, ToolResult)
        assert "Chlorophyll absorbs light" in result.text
        assert result.sources[0]["title"] == "biology.txt (chunk 1)"
        assert (
            result.sources[0]["attachment_id"] == doc
            and "Chlorophyll" in result.sources[0]["content"]
        )
        empty = SEARCH_DOCUMENTS.run({"query": "  "}, ToolContext(user_id=alice, chat_id="x"))
        assert empty.startswith("Error")


def test_indexing_runs_in_background_with_progress_to_done(app):
    with app.app_context():
        alice = _user("alice")
        body = "\n\n".join(f"Section {i}: " + ("lorem ipsum dolor " * 40) for i in range(600))
        body += "\n\nThe final paragraph mentions the quasar."
        doc = _document(alice, "big.txt", body)
        assert document_rows(alice)[0]["status"] == "pending"
        assert schedule_indexing(app, doc) is True
        assert schedule_indexing(app, doc) is False, "one job per document"
        seen = []
        ticks = 0
        while True:
            state = db.session.get(DocumentIndex, doc)
            if state is not None:
                seen.append((state.status, state.chunks, state.chunks_total))
                if state.status in ("done", "error"):
                    break
            db.session.remove()
            gevent.sleep(0)  # the indexer yields between batches, so this loop runs meanwhile
            ticks += 1
        assert seen[-1][0] == "done" and seen[-1][1] == seen[-1][2] > 100
        partial = {
            chunks for status, chunks, total in seen if status == "indexing" and 0 < chunks < total
        }
        assert len(partial) >= 2, f"progress was visible while indexing: {seen[:5]}..."
        assert ticks > 5, "the indexer gave the hub back between batches"
        assert search(alice, "quasar")[0]["attachment_id"] == doc
        assert document_rows(alice)[0]["percent"] == 100
        # Re-indexing replaces the chunks (no duplicates).
        count = len(search(alice, "quasar", limit=10))
        _index_all(app, [doc])
        assert len(search(alice, "quasar", limit=10)) == count


def test_search_indexes_unindexed_documents_on_demand(app):
    with app.app_context():
        alice = _user("alice")
        doc = _document(alice, "notes.txt", "The meeting moved to Thursday.")
        _document(alice, "scan.png", None)  # no text: nothing to index
        assert ensure_indexed(app, alice) == 1
        wait_for_indexing(app, timeout=WAIT_SECONDS)
        assert search(alice, "thursday")[0]["attachment_id"] == doc
        assert ensure_indexed(app, alice) == 0
        statuses = {row["filename"]: row["status"] for row in document_rows(alice)}
        assert statuses == {"notes.txt": "done", "scan.png": "no_text"}


def test_settings_section_polls_while_indexing_and_escapes_names(sqlite_app):
    client = sqlite_app.test_client()
    assert client.get("/settings").status_code == 200  # creates the single user
    with sqlite_app.app_context():
        user_id = db.session.execute(db.select(User.id)).scalar()
        doc = _document(user_id, "<script>alert(1)</script>.txt", "Some text about comets.")
    page = client.get("/settings/documents").get_data(as_text=True)
    assert '<h2 id="section-title">Documents</h2>' in page, "the whole page without HTMX"
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert 'hx-trigger="every 1s"' in page, "a pending document makes the section poll"
    with sqlite_app.app_context():
        _index_all(sqlite_app, [doc])
    section = client.get("/settings/documents", headers={"HX-Request": "true"})
    section = section.get_data(as_text=True)
    assert section.lstrip().startswith('<div id="documents-section"'), "its poll: the list alone"
    assert "indexed (1 passages)" in section and "every 1s" not in section
    assert client.get("/api/documents").get_json()["documents"][0]["status"] == "done"


# --- a full turn through a live server ------------------------------------------------------


@pytest.fixture(scope="module")
def doc_server(live_server_factory):
    from turn_support import turn_server_env

    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def test_turn_searches_documents_without_waiting_for_indexing(doc_server, scripted):
    import sqlite3

    from numi.testing import Scenario
    from turn_support import Api, Socket, db_rows, make_chat, of_type, wait_until

    api = Api(doc_server.url)
    chat = make_chat(api, scripted, settings={"tools": ["search_documents"]})
    user_id = db_rows(doc_server, "SELECT user_id FROM chats WHERE id = ?", chat["id"])[0][0]
    big = "\n\n".join(
        f"Chapter {i}. " + ("filler text about nothing in particular " * 30) for i in range(4000)
    )
    path = doc_server.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as connection:
        for name, body in (
            ("biology.txt", CORPUS["biology.txt"]),
            ("huge.txt", big + "\n\nThe nebula is pink."),
        ):
            connection.execute(
                "INSERT INTO attachments (user_id, filename, mime, size, sha256, storage_path, "
                "extracted_text, created_at)"
                " VALUES (?, ?, 'text/plain', ?, ?, '/nonexistent', ?, '2026-01-01 00:00:00')",
                (user_id, name, len(body), uuid.uuid4().hex, body),
            )

    scripted.enqueue(Scenario().tool_call("search_documents", {"query": "chlorophyll nebula"}))
    scripted.enqueue(Scenario().text("Chlorophyll absorbs light [1]."))
    ws = Socket(doc_server, chat["id"])
    try:
        ws.send(type="send", message="What does chlorophyll do?")
        events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        ws.close()
    end = of_type(events, "tool_end")[0]["data"]
    assert end["ok"], end
    # The first search started indexing both documents and answered at once: the huge one
    # (thousands of chunks) was still being indexed when the turn ended.
    assert "2 documents are still being indexed" in end["result"], end["result"]
    assert of_type(events, "done"), [e["type"] for e in events]
    states = {
        name: (status, vectors)
        for name, status, vectors in db_rows(
            doc_server,
            "SELECT a.filename, d.status, d.embedding_status FROM document_index d "
            "JOIN attachments a ON a.id = d.attachment_id",
        )
    }
    # Its words, or then its vectors (thousands of chunks for the local model), were still
    # being indexed: the turn did not wait for either.
    words, vectors = states.get("huge.txt", (None, None))
    assert words in ("pending", "indexing") or vectors == "indexing", states

    def indexed():
        documents = api.get("/api/documents")[1]["documents"]
        return documents if all(d["status"] == "done" for d in documents) else None

    documents = wait_until(indexed, timeout=60, what="indexing to finish")
    body = {"documents": documents}
    huge = next(d for d in body["documents"] if d["filename"] == "huge.txt")
    assert huge["chunks"] == huge["chunks_total"] > 1000

    scripted.enqueue(Scenario().tool_call("search_documents", {"query": "nebula"}))
    scripted.enqueue(Scenario().text("It is pink."))
    ws = Socket(doc_server, chat["id"])
    try:
        ws.send(type="send", message="What colour is the nebula?")
        events = ws.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        ws.close()
    end = of_type(events, "tool_end")[0]["data"]
    assert "The nebula is pink." in end["result"] and "still being indexed" not in end["result"]
