"""Bad input gets a clear error with a stable code, and changes nothing."""

from __future__ import annotations

import pytest

from numi.extensions import db
from numi.models import Chat, Endpoint


def _snapshot(app):
    with app.app_context():
        db.session.expire_all()
        chats = [
            (c.id, c.title, c.settings_json, c.endpoint_id, c.model, c.deleted_at)
            for c in db.session.execute(db.select(Chat).order_by(Chat.id)).scalars()
        ]
        endpoints = [
            (e.id, e.name, e.kind, e.base_url, e.deleted_at)
            for e in db.session.execute(db.select(Endpoint).order_by(Endpoint.id)).scalars()
        ]
        return chats, endpoints


@pytest.fixture
def existing(client):
    chat = client.post(
        "/api/session", json={"title": "original", "system_prompt": "orig"}
    ).get_json()
    endpoint = client.post(
        "/api/endpoints",
        json={"name": "Orig", "kind": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
    ).get_json()
    return {"chat": chat["id"], "endpoint": endpoint["id"]}


def _cases(app, ids):
    chat, endpoint = ids["chat"], ids["endpoint"]
    limits = app.config
    long_title = "t" * (limits["NUMI_MAX_TITLE_CHARS"] + 1)
    long_prompt = "p" * (limits["NUMI_MAX_SYSTEM_PROMPT_CHARS"] + 1)
    ok_endpoint = {"name": "New", "kind": "openai_chat", "base_url": "http://127.0.0.1:11434/v1"}
    raw = {"content_type": "application/json"}
    return [
        # (method, url, request kwargs, expected status, expected code)
        ("POST", "/api/session", {"data": "{not json", **raw}, 400, "invalid_json"),
        ("POST", "/api/session", {"data": b"\xff\xfe", **raw}, 400, "invalid_json"),
        ("POST", "/api/session", {"json": ["a", "list"]}, 400, "invalid_json"),
        ("POST", "/api/session", {"json": "just a string"}, 400, "invalid_json"),
        ("PATCH", f"/api/session/{chat}", {"data": "{", **raw}, 400, "invalid_json"),
        ("POST", "/api/endpoints", {"data": "[1,", **raw}, 400, "invalid_json"),
        ("POST", "/api/session", {"json": {"title": long_title}}, 400, "too_long"),
        ("PATCH", f"/api/session/{chat}", {"json": {"title": long_title}}, 400, "too_long"),
        ("PATCH", f"/api/session/{chat}", {"json": {"title": 42}}, 400, "invalid_input"),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"system_prompt": long_prompt}},
            400,
            "too_long",
        ),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"settings": {"system_prompt": long_prompt}}},
            400,
            "too_long",
        ),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"title": "changed", "settings": {"colour": "red"}}},
            400,
            "unknown_setting",
        ),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"settings": "not an object"}},
            400,
            "invalid_input",
        ),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"title": "changed", "temperature": 9}},
            400,
            "invalid_input",
        ),
        ("PATCH", f"/api/session/{chat}", {"json": {"temperature": "hot"}}, 400, "invalid_input"),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"reasoning_effort": "extreme"}},
            400,
            "invalid_input",
        ),
        ("PATCH", f"/api/session/{chat}", {"json": {"endpoint_id": "abc"}}, 400, "invalid_input"),
        (
            "PATCH",
            f"/api/session/{chat}",
            {"json": {"title": "changed", "endpoint_id": 99999}},
            404,
            "not_found",
        ),
        ("POST", f"/c/{chat}/rename", {"data": {"title": long_title}}, 400, "too_long"),
        ("POST", f"/c/{chat}/settings", {"data": {"system_prompt": long_prompt}}, 400, "too_long"),
        ("POST", f"/c/{chat}/settings", {"data": {"temperature": "-1"}}, 400, "invalid_input"),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "kind": "gemini"}},
            400,
            "unknown_kind",
        ),
        ("POST", "/api/endpoints", {"json": {**ok_endpoint, "kind": None}}, 400, "unknown_kind"),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "base_url": "ftp://127.0.0.1/v1"}},
            400,
            "invalid_url",
        ),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "base_url": "javascript:alert(1)"}},
            400,
            "invalid_url",
        ),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "base_url": "not a url"}},
            400,
            "invalid_url",
        ),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "base_url": "http://"}},
            400,
            "invalid_url",
        ),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "base_url": ["http://x"]}},
            400,
            "invalid_url",
        ),
        ("POST", "/api/endpoints", {"json": {**ok_endpoint, "name": ""}}, 400, "invalid_input"),
        ("POST", "/api/endpoints", {"json": {**ok_endpoint, "name": "n" * 101}}, 400, "too_long"),
        (
            "POST",
            "/api/endpoints",
            {"json": {**ok_endpoint, "reasoning_policy": "sometimes"}},
            400,
            "invalid_input",
        ),
        (
            "POST",
            "/settings/endpoints",
            {"data": {**ok_endpoint, "kind": "gemini"}},
            400,
            "unknown_kind",
        ),
        (
            "PATCH",
            f"/api/endpoints/{endpoint}",
            {"json": {"base_url": "gopher://x"}},
            400,
            "invalid_url",
        ),
        (
            "PATCH",
            f"/api/endpoints/{endpoint}",
            {"json": {"name": "Renamed", "kind": "nope"}},
            400,
            "unknown_kind",
        ),
        # A send is checked whole before the seed's model and tool fields change the chat.
        (
            "POST",
            "/api/chat_stream",
            {"json": {"session": chat, "model": "other-model", "message": " "}},
            400,
            "empty_message",
        ),
        (
            "POST",
            "/api/chat_stream",
            {"json": {"session": chat, "allow_bash": True, "message": "hi", "queue": "maybe"}},
            400,
            "invalid_input",
        ),
        (
            "POST",
            "/api/chat_stream",
            {"json": {"session": chat, "use_rag": True, "message": "hi", "compare": "1:m"}},
            400,
            "compare_too_few",
        ),
        (
            "POST",
            "/api/chat_stream",
            {
                "json": {
                    "session": chat,
                    "model": "other-model",
                    "message": "hi",
                    "attachments": "x",
                }
            },
            400,
            "invalid_input",
        ),
        ("GET", "/api/sessions?cursor=garbage", {}, 400, "invalid_cursor"),
        ("GET", "/api/sessions?cursor=2024-13-45T99:00:00|abc", {}, 400, "invalid_cursor"),
        ("GET", "/api/sessions?limit=0", {}, 400, "invalid_input"),
        ("GET", "/api/sessions?limit=ten", {}, 400, "invalid_input"),
        ("GET", f"/api/history/{chat}?before=-5", {}, 400, "invalid_input"),
        ("GET", f"/api/history/{chat}?before=x", {}, 400, "invalid_input"),
        ("GET", "/api/history/" + "x" * 300, {}, 404, "not_found"),
        ("GET", "/api/nope", {}, 404, "not_found"),
        ("PUT", "/api/sessions", {}, 405, "method_not_allowed"),
    ]


def test_bad_input_is_refused_with_a_stable_code_and_changes_nothing(app, client, existing):
    before = _snapshot(app)
    cases = _cases(app, existing)
    assert len(cases) >= 40
    for method, url, kwargs, status, code in cases:
        response = client.open(url, method=method, **kwargs)
        where = f"{method} {url[:60]} {str(kwargs)[:80]}"
        assert response.status_code == status, (
            f"{where}: {response.status_code} {response.get_data(as_text=True)[:200]}"
        )
        if url.startswith("/api/"):
            error = response.get_json()["error"]
            assert error["code"] == code, where
            assert error["message"] and "Traceback" not in error["message"], where
        else:
            body = response.get_data(as_text=True)
            assert "Traceback" not in body and f"<code>{code}</code>" in body, where
    assert _snapshot(app) == before


def test_htmx_errors_come_back_as_a_toast(sqlite_client):
    chat = sqlite_client.post("/api/session", json={}).get_json()["id"]
    response = sqlite_client.post(
        f"/c/{chat}/rename", data={"title": "t" * 500}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 400
    assert response.headers["HX-Retarget"] == "#toasts"
    body = response.get_data(as_text=True)
    assert 'data-code="too_long"' in body and "too long" in body


def test_oversized_request_body_is_refused(make_app):
    app = make_app(NUMI_MAX_REQUEST_BYTES=1024)
    client = app.test_client()
    response = client.post("/api/session", json={"title": "x", "system_prompt": "y" * 5000})
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "too_large"
    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_a_server_error_shows_no_stack_trace(sqlite_app):
    @sqlite_app.get("/api/_boom")
    def _boom():  # a route added by the test: an unexpected exception inside a view
        raise RuntimeError("secret internal detail")

    response = sqlite_app.test_client().get("/api/_boom")
    assert response.status_code == 500
    body = response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "internal_error"
    assert "secret internal detail" not in body and "Traceback" not in body
