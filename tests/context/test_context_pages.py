"""The context ring, the panel's Auto-compact switch, context_info without a model, and escaped file names."""

from __future__ import annotations

import io


def new_chat(client) -> str:
    response = client.post("/api/session", json={"title": "gauge"})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def test_gauge_and_auto_compact_toggle(client):
    chat_id = new_chat(client)
    gauge = client.get(f"/c/{chat_id}/context_gauge", headers={"HX-Request": "true"})
    assert gauge.status_code == 200
    assert 'class="ring"' in gauge.get_data(as_text=True)
    # Auto-compact and Compact are in the panel the ring opens.
    panel = client.get(f"/c/{chat_id}/context_panel", headers={"HX-Request": "true"})
    html = panel.get_data(as_text=True)
    assert 'id="compact-button"' in html and "checked" in html  # global default on
    off = client.post(f"/c/{chat_id}/auto_compact", data={}, headers={"HX-Request": "true"})
    assert off.status_code == 200 and "checked" not in off.get_data(as_text=True)
    assert off.headers["HX-Trigger"] == "numi:context-changed"  # the ring follows
    assert client.get(f"/api/session/{chat_id}").get_json()["settings"]["auto_compact"] is False
    on = client.post(
        f"/c/{chat_id}/auto_compact", data={"auto_compact": "1"}, headers={"HX-Request": "true"}
    )
    assert "checked" in on.get_data(as_text=True)
    info = client.get(f"/api/session/{chat_id}/context_info").get_json()
    assert (
        info["auto_compact"] is True
        and info["estimated_tokens"] > 0
        and info["messages_included"] == 0
    )
    assert (
        info["context_window"] == 32768
        and info["window_assumed"] is True
        and info["checkpoint"] is None
    )


def test_compact_without_a_model_says_so(client):
    chat_id = new_chat(client)
    response = client.post(f"/api/session/{chat_id}/compact")
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "no_model"


def test_file_names_are_escaped_in_the_transcript(app, client):
    chat_id = new_chat(client)
    name = "<img src=x onerror=alert(1)>.txt"
    item = client.post(
        "/api/upload",
        data={"file": (io.BytesIO(b"hello"), name, "text/plain")},
        content_type="multipart/form-data",
    ).get_json()["attachments"][0]
    with app.app_context():
        from numi.extensions import db
        from numi.models import Message

        message = Message(chat_id=chat_id, role="user", content="see file")
        message.content_parts = [{"type": "attachment", "id": item["id"]}]
        db.session.add(message)
        db.session.commit()
    html = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "attachment-chip" in html
    assert "<img src=x onerror" not in html and "&lt;img src=x onerror=alert(1)&gt;.txt" in html
    assert item["filename"] == name  # the API returns the name as data, unchanged
