"""The Library's documents (issue 37), in-process through the real HTTP API: Delete takes a
document's file, chunks, vectors and index rows (and only its owner can); a DOCX is read
with its heading styles, so its chunks keep their heading path; a DOCX that is no DOCX, a
zip bomb or a DTD is refused with `docx_unreadable` and nothing is stored; a reranker
(the scripted /v1/rerank) orders the best passages, and one that fails changes nothing."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from numi.knowledge.index import wait_for_indexing
from numi.testing import Scenario
from server_wait import WAIT_SECONDS

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
STYLES = f"""<?xml version="1.0"?><w:styles {W}>
<w:style w:type="paragraph" w:styleId="Titre1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="Titre2"><w:name w:val="heading 2"/></w:style>
</w:styles>"""


def paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{props}<w:r><w:t>{text}</w:t></w:r></w:p>"


def docx(*paragraphs: str, styles: str = STYLES, document: bytes | None = None) -> bytes:
    """A DOCX as Word writes it: its text in word/document.xml, its styles' names apart."""
    body = (
        f'<?xml version="1.0"?><w:document {W}><w:body>{"".join(paragraphs)}</w:body></w:document>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", document if document is not None else body)
        archive.writestr("word/styles.xml", styles)
    return buffer.getvalue()


def upload(client, name: str, data: bytes, mime: str = "text/plain"):
    return client.post(
        "/api/upload",
        data={"file": (io.BytesIO(data), name, mime)},
        content_type="multipart/form-data",
    )


def uploaded(client, name: str, data: bytes, mime: str = "text/plain") -> int:
    response = upload(client, name, data, mime)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["attachments"][0]["id"]


def use_scripted_embeddings(client, scripted) -> None:
    made = client.post(
        "/api/endpoints",
        json={"name": "Embedder", "kind": "openai_chat", "base_url": scripted.openai_base_url},
    )
    assert made.status_code == 201, made.get_json()
    saved = client.put(
        "/api/documents/settings",
        json={"embedding": {"endpoint_id": made.get_json()["id"], "model": "scripted-embed"}},
    )
    assert saved.status_code == 200, saved.get_json()


def rows_of(app, attachment_id: int) -> dict[str, int]:
    from numi.extensions import db

    counts = {}
    with app.app_context():
        for table in ("fts_document_chunks", "document_chunks", "document_index", "attachments"):
            column = "id" if table == "attachments" else "attachment_id"
            counts[table] = db.session.execute(
                db.text(f"SELECT count(*) FROM {table} WHERE {column} = :a"), {"a": attachment_id}
            ).scalar()
        db.session.remove()
    return counts


def test_delete_takes_the_documents_file_chunks_vectors_and_index_rows(app, client, scripted):
    use_scripted_embeddings(client, scripted)
    gone = uploaded(client, "kiln.txt", b"The kiln fires stoneware at 1240 degrees.")
    kept = uploaded(client, "glaze.txt", b"Celadon glaze turns green in reduction.")
    project = client.post("/api/projects", json={"name": "Pottery"}).get_json()
    client.post(f"/api/projects/{project['id']}/files", json={"attachment_id": gone})
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        stored = Path(app.config["NUMI_DATA_DIR"]) / db.session.get(Attachment, gone).storage_path
        db.session.remove()
    assert stored.is_file()
    assert all(rows_of(app, gone).values()), rows_of(app, gone)  # vectors in document_chunks

    response = client.delete(f"/api/documents/{gone}")
    assert response.status_code == 200 and response.get_json() == {"deleted": gone}
    assert set(rows_of(app, gone).values()) == {0}
    assert not stored.exists()
    assert client.get(f"/api/projects/{project['id']}/files").get_json()["files"] == []
    found = client.get("/api/documents/search", query_string={"q": "kiln stoneware glaze"})
    assert [p["name"] for p in found.get_json()["passages"]] == ["glaze.txt"]
    assert all(rows_of(app, kept).values())

    again = client.delete(f"/api/documents/{gone}")
    assert again.status_code == 404 and again.get_json()["error"]["code"] == "not_found"
    assert client.post(f"/library/{gone}/delete").status_code == 404


def test_delete_from_the_library_page_keeps_a_file_another_row_uses(sqlite_app, sqlite_client):
    app, client = sqlite_app, sqlite_client
    first = uploaded(client, "notes.txt", b"Same bytes, two names.")
    second = uploaded(client, "copy.txt", b"Same bytes, two names.")
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    response = client.post(f"/library/{first}/delete", headers={"HX-Request": "true"})
    assert response.status_code == 200 and response.get_data() == b""  # the row goes
    library = client.get("/library").get_data(as_text=True)
    assert "notes.txt" not in library and "copy.txt" in library
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        path = Path(app.config["NUMI_DATA_DIR"]) / db.session.get(Attachment, second).storage_path
        db.session.remove()
    assert path.is_file()
    plain = client.post(f"/library/{second}/delete")
    assert plain.status_code == 303 and not path.exists()


def test_only_the_owner_can_delete_a_document(multi_app, client_a, client_b):
    bobs = uploaded(client_b, "bob.txt", b"Bob's vault code is 4711.")
    wait_for_indexing(multi_app, timeout=WAIT_SECONDS)
    refused = client_a.delete(f"/api/documents/{bobs}")
    assert refused.status_code == 404 and refused.get_json()["error"]["code"] == "not_found"
    assert client_a.post(f"/library/{bobs}/delete").status_code == 404
    assert all(rows_of(multi_app, bobs).values())
    found = client_b.get("/api/documents/search", query_string={"q": "vault code"}).get_json()
    assert [p["name"] for p in found["passages"]] == ["bob.txt"]


def test_another_users_citation_and_passage_panel_are_not_found(multi_app, client_a, client_b):
    bobs = client_b.post("/api/session", json={"title": "bob chat"}).get_json()
    bob_doc = uploaded(client_b, "bob.txt", b"Bob's vault code is 4711.")
    wait_for_indexing(multi_app, timeout=WAIT_SECONDS)
    for path in (f"/c/{bobs['id']}/messages/1/sources/1", f"/c/{bobs['id']}/context_panel"):
        response = client_a.get(path, headers={"HX-Request": "true"})
        assert response.status_code == 404 and "4711" not in response.get_data(as_text=True)
    refused = client_a.post(
        f"/c/{bobs['id']}/passages/context", data={"passage": f"{bob_doc}:0", "in_context": "0"}
    )
    assert refused.status_code == 404
    assert (
        client_b.get(f"/api/session/{bobs['id']}").get_json()["settings"].get("left_out_passages")
        is None
    )


def test_a_docx_is_split_by_its_headings(sqlite_app, sqlite_client):
    app, client = sqlite_app, sqlite_client
    report = docx(
        paragraph("Annual report", "Title"),
        paragraph("Finances", "Titre1"),
        paragraph("Revenue grew by a third, mostly from the bakery in Lyon."),
        paragraph("Staff", "Titre1"),
        paragraph("Hiring", "Titre2"),
        paragraph("Two bakers joined in March; one left in June."),
    )
    attachment_id = uploaded(client, "report.docx", report, DOCX_MIME)
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    found = client.get(
        "/api/documents/search", query_string={"q": "bakers joined", "limit": 1}
    ).get_json()
    [best] = found["passages"]
    assert best["document_id"] == attachment_id and "Two bakers joined" in best["text"]
    assert best["where"]["heading"] == "Staff › Hiring"  # a Title is level 1, as Heading 1
    revenue = client.get("/api/documents/search", query_string={"q": "revenue"}).get_json()
    assert revenue["passages"][0]["where"]["heading"] == "Finances"


@pytest.mark.parametrize(
    "data, why",
    [
        (b"PK\x03\x04\x00\xff no zip at all", "not a DOCX"),
        (docx(document=b"\0" * (33 * 1024 * 1024)), "expands past 32 MB"),
        (
            docx(
                document=(
                    b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa">]>'
                    b"<w:document>&a;</w:document>"
                )
            ),
            "DTD",
        ),
        (docx(document=b"<w:document><w:body>"), "XML is damaged"),
    ],
    ids=["not-a-zip", "zip-bomb", "dtd", "damaged"],
)
def test_a_bad_docx_is_refused_and_nothing_is_stored(sqlite_app, sqlite_client, data, why):
    response = upload(sqlite_client, "bad.docx", data, DOCX_MIME)
    assert response.status_code == 415, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "docx_unreadable" and why in error["message"]
    assert sqlite_client.get("/api/documents").get_json()["documents"] == []


def test_a_reranker_orders_the_best_passages_and_a_failing_one_changes_nothing(
    sqlite_app, sqlite_client, scripted
):
    app, client = sqlite_app, sqlite_client
    assert client.put("/api/documents/settings", json={"embedding": "none"}).status_code == 200
    # Full text puts the rare word first; the scripted reranker (the share of the query's
    # words a passage has) prefers the passage with the three common ones.
    uploaded(client, "rare.txt", b"The zygote divides. A zygote is one cell.")
    uploaded(client, "common.txt", b"Apple, banana and cherry grow in the orchard.")
    for n in range(4):
        uploaded(client, f"fruit{n}.txt", f"apple banana cherry note {n}".encode())
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    query = {"q": "zygote apple banana cherry orchard", "limit": 2}
    before = client.get("/api/documents/search", query_string=query).get_json()
    assert before["passages"][0]["name"] == "rare.txt" and before["reranked"] is False

    made = client.post(
        "/api/endpoints",
        json={"name": "Reranker", "kind": "openai_chat", "base_url": scripted.openai_base_url},
    ).get_json()
    chosen = {"endpoint_id": made["id"], "model": "scripted-rerank"}
    saved = client.put("/api/documents/settings", json={"rerank": chosen})
    assert saved.status_code == 200 and saved.get_json()["rerank"] == chosen
    after = client.get("/api/documents/search", query_string=query).get_json()
    assert after["reranked"] is True and after["note"] == before["note"]  # full text only
    assert after["ranked_by"] == "reranker"
    assert after["passages"][0]["name"] == "common.txt"
    [asked] = [r.body for r in scripted.embedding_requests if "query" in (r.body or {})]
    assert asked["model"] == "scripted-rerank" and asked["query"] == query["q"]

    scripted.embedding_failures.append(Scenario.http_error(503, message="busy"))
    failed = client.get("/api/documents/search", query_string=query).get_json()
    assert failed["reranked"] is False and failed["note"].startswith("Not reranked:")
    assert failed["ranked_by"] is None
    assert [p["name"] for p in failed["passages"]] == [p["name"] for p in before["passages"]]

    for bad in ({"endpoint_id": made["id"]}, {"endpoint_id": "x", "model": "m"}, "magic"):
        refused = client.put("/api/documents/settings", json={"rerank": bad})
        assert refused.get_json()["error"]["code"] == "invalid_documents_settings", bad
    assert client.get("/api/documents/settings").get_json()["rerank"] == chosen
    assert client.put("/api/documents/settings", json={"rerank": None}).status_code == 200
    assert client.get("/api/documents/settings").get_json()["rerank"] is None

    form = client.post(
        "/settings/documents/rerank",
        data={"rerank": f"endpoint:{made['id']}", "model": "scripted-rerank"},
    )
    assert form.status_code == 302 and form.location.endswith("/settings/documents")
    assert client.get("/api/documents/settings").get_json()["rerank"] == chosen
    page = client.get("/settings/documents").get_data(as_text=True)
    assert f'value="endpoint:{made["id"]}" selected' in page and 'value="scripted-rerank"' in page


def test_a_pdf_passage_links_the_file_at_its_page(sqlite_app, sqlite_client):
    from flask import render_template

    # By its path: the bench tests put bench/ (which has a context.py) first on sys.path,
    # and in a worker that ran them `context` is that module, not tests/context.
    import importlib.util

    where = Path(__file__).resolve().parents[1] / "context" / "context_support.py"
    spec = importlib.util.spec_from_file_location("library_context_support", where)
    support = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(support)
    minimal_pdf = support.minimal_pdf
    from numi.knowledge.passages import passage_view

    app, client = sqlite_app, sqlite_client
    pdf = uploaded(client, "kiln.pdf", minimal_pdf("Cone six is 1222 degrees"), "application/pdf")
    wait_for_indexing(app, timeout=WAIT_SECONDS)
    with app.test_request_context():
        from numi.models import Attachment
        from numi.extensions import db

        owner = db.session.get(Attachment, pdf).user_id
        passage = passage_view(owner, pdf, 0)
        assert passage["pdf"] and passage["where"]["page"] == 1
        html = render_template("partials/_passage.html", passage=passage, number=1)
        db.session.remove()
    assert f'href="/api/attachments/{pdf}#page=1"' in html and "Open the PDF at page 1" in html
    assert '<mark class="passage-mark">Cone six is 1222 degrees</mark>' in html
