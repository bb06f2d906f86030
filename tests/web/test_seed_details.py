"""Seed details (issue 14): the session form's `rag` switch, and export Content-Types."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "body, kwargs",
    [
        ({"name": "form", "rag": "true"}, {"content_type": "multipart/form-data"}),
        ({"title": "json", "rag": True}, {}),
        ({"title": "json", "use_rag": True}, {}),
    ],
)
def test_rag_on_session_creation_turns_document_search_on(sqlite_client, body, kwargs):
    if kwargs:
        response = sqlite_client.post("/api/session", data=body, **kwargs)
    else:
        response = sqlite_client.post("/api/session", json=body)
    assert response.status_code == 201, response.get_data(as_text=True)
    assert "search_documents" in response.get_json()["settings"]["tools"]


def test_rag_false_and_bad_values(sqlite_client):
    off = sqlite_client.post(
        "/api/session", data={"name": "off", "rag": "false"}, content_type="multipart/form-data"
    )
    assert off.status_code == 201
    assert "search_documents" not in (off.get_json()["settings"].get("tools") or [])
    chat_id = sqlite_client.post("/api/session", json={"rag": True}).get_json()["id"]
    patched = sqlite_client.patch(
        f"/api/session/{chat_id}", json={"rag": False, "tools": ["current_time"]}
    )
    assert patched.get_json()["settings"]["tools"] == ["current_time"]
    bad = sqlite_client.post("/api/session", json={"rag": "maybe"})
    assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "invalid_input"
    assert len(sqlite_client.get("/api/sessions").get_json()["sessions"]) == 2


def test_export_content_type_names_the_charset_once(sqlite_client):
    chat_id = sqlite_client.post("/api/session", json={"title": "x"}).get_json()["id"]
    expected = {
        "md": "text/markdown; charset=utf-8",
        "txt": "text/plain; charset=utf-8",
        "html": "text/html; charset=utf-8",
        "json": "application/json",
    }
    for fmt, content_type in expected.items():
        response = sqlite_client.get(f"/api/session/{chat_id}/export?fmt={fmt}")
        assert response.status_code == 200
        assert response.headers["Content-Type"] == content_type, fmt
