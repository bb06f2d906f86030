"""Uploads through the real app: limits, types, PDF text, storage by hash, owner-only download,
and downloads that never run as this site (scripts, styles, HTML, SVG come back inert)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from context_support import minimal_pdf, png


def post_file(client, name, data, mime="application/octet-stream"):
    return client.post(
        "/api/upload",
        data={"file": (io.BytesIO(data), name, mime)},
        content_type="multipart/form-data",
    )


def test_text_upload_is_stored_once_by_hash_and_deduplicated(app, client):
    first = post_file(client, "notes.md", b"# Notes\nremember the milk\n", "text/markdown")
    assert first.status_code == 201, first.get_json()
    item = first.get_json()["attachments"][0]
    assert item["filename"] == "notes.md" and item["size"] == 26 and item["mime"] == "text/markdown"
    again = post_file(client, "notes.md", b"# Notes\nremember the milk\n", "text/markdown")
    assert again.get_json()["attachments"][0]["id"] == item["id"]
    renamed = post_file(client, "copy.md", b"# Notes\nremember the milk\n", "text/markdown")
    assert renamed.get_json()["attachments"][0]["id"] != item["id"]
    uploads = Path(app.config["NUMI_DATA_DIR"]) / "uploads"
    files = [p for p in uploads.rglob("*") if p.is_file()]
    assert [p.name for p in files] == [item["sha256"]], "one file per content hash"
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        assert db.session.get(Attachment, item["id"]).extracted_text.endswith("remember the milk\n")


def test_code_file_counts_as_text(client):
    response = post_file(client, "main.py", b"print('hi')\n", "application/x-python")
    assert response.status_code == 201
    assert response.get_json()["attachments"][0]["mime"].startswith("text/")


def test_pdf_text_is_extracted_from_a_real_pdf(app, client):
    response = post_file(
        client, "report.pdf", minimal_pdf("Quarterly numbers 4711"), "application/pdf"
    )
    assert response.status_code == 201, response.get_json()
    item = response.get_json()["attachments"][0]
    assert item["mime"] == "application/pdf"
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        text = db.session.get(Attachment, item["id"]).extracted_text
    assert "Quarterly numbers 4711" in text


def test_broken_pdf_is_refused(client):
    response = post_file(
        client, "broken.pdf", b"%PDF-1.4\nthis is not a pdf at all", "application/pdf"
    )
    assert response.status_code == 415
    assert response.get_json()["error"]["code"] == "pdf_unreadable"


def test_limits_size_type_and_empty(make_app):
    app = make_app(NUMI_UPLOAD_MAX_BYTES=100)
    client = app.test_client()
    too_big = post_file(client, "big.txt", b"a" * 101, "text/plain")
    assert too_big.status_code == 413 and too_big.get_json()["error"]["code"] == "file_too_large"
    exactly = post_file(client, "ok.txt", b"a" * 100, "text/plain")
    assert exactly.status_code == 201
    zipped = post_file(client, "a.zip", b"PK\x03\x04" + b"\x00" * 20, "application/zip")
    assert zipped.status_code == 415 and zipped.get_json()["error"]["code"] == "file_type"
    empty = post_file(client, "e.txt", b"", "text/plain")
    assert empty.status_code == 400 and empty.get_json()["error"]["code"] == "empty_file"
    none = client.post("/api/upload", data={}, content_type="multipart/form-data")
    assert none.status_code == 400 and none.get_json()["error"]["code"] == "no_file"
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        assert db.session.query(Attachment).count() == 1, "refused uploads store nothing"


def test_a_label_does_not_make_html_an_image(client):
    response = post_file(client, "cat.png", b"<html><script>alert(1)</script></html>", "image/png")
    assert response.status_code == 201
    assert response.get_json()["attachments"][0]["mime"] == "text/plain"


def test_download_is_owner_only(client_a, client_b):
    item = post_file(client_a, "secret.txt", b"top secret", "text/plain").get_json()["attachments"][
        0
    ]
    own = client_a.get(f"/api/attachments/{item['id']}")
    assert own.status_code == 200 and own.data == b"top secret"
    assert own.headers["X-Content-Type-Options"] == "nosniff"
    assert own.headers["Content-Type"] == "text/plain; charset=utf-8"  # the charset once
    assert own.headers["Content-Disposition"].startswith("attachment")
    foreign = client_b.get(f"/api/attachments/{item['id']}")
    assert foreign.status_code == 404 and foreign.get_json()["error"]["code"] == "not_found"
    assert client_b.get(f"/api/attachments/{item['id']}/thumbnail").status_code == 404
    assert client_b.get("/api/attachments/999999").status_code == 404


def test_image_thumbnail_and_downscale(app, client, require_extra):
    Image = require_extra("PIL.Image", "images")

    item = post_file(client, "wide.png", png(3000, 1000), "image/png").get_json()["attachments"][0]
    assert item["is_image"] and item["thumbnail_url"]
    thumb = client.get(item["thumbnail_url"])
    assert thumb.status_code == 200 and thumb.mimetype == "image/png"
    assert max(Image.open(io.BytesIO(thumb.data)).size) <= 160
    with app.app_context():
        from numi.chat.attachments import image_bytes
        from numi.extensions import db
        from numi.models import Attachment

        mime, data = image_bytes(
            app.config["NUMI_DATA_DIR"], db.session.get(Attachment, item["id"]), 1568
        )
    assert mime == "image/png" and Image.open(io.BytesIO(data)).size == (1568, 523)


# --- downloads: inert unless an image or a PDF ---------------------------------------------

SANDBOX = "sandbox; default-src 'none'"


def upload(client, name: str, data: bytes, mime: str) -> dict:
    response = post_file(client, name, data, mime)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["attachments"][0]


@pytest.mark.parametrize(
    "name, data, declared",
    [
        ("app.js", b"fetch('/api/sessions').then(r => r.text()).then(alert)", "text/javascript"),
        ("style.css", b"body { background: url(/api/sessions) }", "text/css"),
        ("page.html", b"<!doctype html><script>alert(document.cookie)</script>", "text/html"),
        (
            "logo.svg",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
        ),
        (
            "page.xhtml",
            b'<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>',
            "application/xhtml+xml",
        ),
    ],
)
def test_active_content_downloads_as_inert_text(client, name, data, declared):
    item = upload(client, name, data, declared)
    for url in (item["url"], item["url"] + "?download=1"):
        response = client.get(url)
        assert response.status_code == 200 and response.data == data
        assert response.mimetype in ("text/plain", "application/octet-stream"), response.mimetype
        assert response.headers["Content-Disposition"].startswith("attachment")
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Security-Policy"] == SANDBOX


def test_images_and_pdfs_show_inline_in_a_sandbox(client, require_extra):
    require_extra("PIL", "images")
    for name, data, mime in (
        ("dot.png", png(2, 2), "image/png"),
        ("doc.pdf", minimal_pdf("hi"), "application/pdf"),
    ):
        item = upload(client, name, data, mime)
        response = client.get(item["url"])
        assert response.mimetype == mime
        assert not response.headers.get("Content-Disposition", "").startswith("attachment")
        assert response.headers["Content-Security-Policy"] == SANDBOX
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert (
            client.get(item["url"] + "?download=1")
            .headers["Content-Disposition"]
            .startswith("attachment")
        )


def stored_text(app, item) -> str:
    with app.app_context():
        from numi.extensions import db
        from numi.models import Attachment

        return db.session.get(Attachment, item["id"]).extracted_text


def test_pdf_decompression_bomb_is_indexed_up_to_the_stream_limit_and_says_so(make_app):
    """Issue 28, item 8: a few hundred KB that inflate to 64 MB per page, on 40 pages."""
    from context_support import bomb_pdf

    app = make_app(NUMI_PDF_MAX_STREAM_MB=4)
    data = bomb_pdf(pages=40, inflated_bytes=64 * 1024 * 1024)
    assert len(data) < 400_000
    response = post_file(app.test_client(), "bomb.pdf", data, "application/pdf")
    assert response.status_code == 201, response.get_json()
    text = stored_text(app, response.get_json()["attachments"][0])
    assert text.startswith("[page 1]\nIntro page 4711")
    assert "bomb" not in text
    assert text.endswith(
        "[... PDF cut: page 2 inflates past 4 MB or holds too many operators; the text stops before it]"
    )


def test_pdf_pages_past_the_page_limit_are_left_out_and_the_text_says_so(make_app):
    from context_support import bomb_pdf

    app = make_app(NUMI_PDF_MAX_PAGES=3)
    response = post_file(
        app.test_client(), "long.pdf", bomb_pdf(pages=10, inflated_bytes=320), "application/pdf"
    )
    assert response.status_code == 201, response.get_json()
    text = stored_text(app, response.get_json()["attachments"][0])
    assert "[page 3]\n" in text and "[page 4]" not in text
    assert text.endswith("[... PDF cut: only the first 3 of 10 pages were read]")


def test_pdf_reading_that_outgrows_its_memory_bound_keeps_the_pages_read(make_app):
    from context_support import bomb_pdf

    app = make_app(NUMI_PDF_MAX_STREAM_MB=512, NUMI_PDF_MAX_MEMORY_MB=200)
    response = post_file(
        app.test_client(),
        "bomb.pdf",
        bomb_pdf(pages=5, inflated_bytes=300 * 1024 * 1024),
        "application/pdf",
    )
    assert response.status_code == 201, response.get_json()
    text = stored_text(app, response.get_json()["attachments"][0])
    assert text.startswith("[page 1]\nIntro page 4711") and "[... PDF cut: " in text
