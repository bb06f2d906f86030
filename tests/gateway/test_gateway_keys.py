"""API keys in-process (no socket needed): made in Settings (shown once, hashed at
rest) and on the API, limited per minute with 429 and Retry-After, CORS off unless
configured, a session cookie never opens /v1, and one user's key never reaches another
user's models or chats. On every database backend."""

from __future__ import annotations

import re

from fixtures.users import sign_in
from numi.extensions import db
from numi.gateway.keys import hash_key
from numi.models import ApiKey, Chat, Endpoint


def _key(client, **fields) -> str:
    response = client.post("/api/keys", json={"name": "script", **fields})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["secret"]


def test_settings_shows_a_new_key_once_and_keeps_only_its_hash(make_app):
    app = make_app()
    client = app.test_client()
    page = client.post("/settings/api-keys", data={"name": "Zed", "keep": "1"})
    assert page.status_code == 201
    secret = re.search(r'value="(numi-sk-[^"]+)"', page.get_data(as_text=True)).group(1)
    with app.app_context():
        row = db.session.query(ApiKey).one()
        assert (row.name, row.keep, row.key_hash) == ("Zed", True, hash_key(secret))
        assert secret not in repr(vars(row))
    again = client.get("/settings/api-keys").get_data(as_text=True)
    assert "Zed" in again and secret not in again
    models = client.get("/v1/models", headers={"Authorization": f"Bearer {secret}"})
    assert models.status_code == 200 and models.get_json()["object"] == "list"
    refused = client.post("/settings/api-keys", data={"name": " "})
    assert refused.status_code == 400 and "invalid_key_name" in refused.get_data(as_text=True)


def test_a_keys_use_is_noted_and_its_revocation_holds_from_the_next_request(make_app):
    app = make_app()
    client = app.test_client()
    secret = _key(client)
    listed = client.get("/api/keys").get_json()["keys"]
    assert [k["last_used_at"] for k in listed] == [None]
    bearer = {"Authorization": f"Bearer {secret}"}
    assert client.get("/v1/models", headers=bearer).status_code == 200
    used = client.get("/api/keys").get_json()["keys"][0]
    assert used["last_used_at"] is not None
    # Noted at most once a minute: the next request writes nothing.
    assert client.get("/v1/models", headers=bearer).status_code == 200
    assert client.get("/api/keys").get_json()["keys"][0]["last_used_at"] == used["last_used_at"]
    assert client.delete(f"/api/keys/{used['id']}").status_code == 204
    refused = client.get("/v1/models", headers=bearer)
    assert refused.status_code == 401
    assert refused.get_json()["error"]["code"] == "api_key_invalid"


def test_requests_past_the_minute_limit_get_429_with_retry_after(make_app):
    app = make_app(NUMI_API_RATE_PER_MINUTE=2)
    client = app.test_client()
    secret = _key(client)
    other = _key(client)
    headers = {"Authorization": f"Bearer {secret}"}
    assert [client.get("/v1/models", headers=headers).status_code for _ in range(2)] == [200, 200]
    limited = client.get("/v1/models", headers=headers)
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert limited.get_json()["error"]["code"] == "api_rate_limited"
    anthropic_shaped = client.post("/v1/messages", headers={"x-api-key": secret}, json={})
    assert anthropic_shaped.get_json()["error"]["type"] == "rate_limit_error"
    # Each key has its own minute.
    assert client.get("/v1/models", headers={"Authorization": f"Bearer {other}"}).status_code == 200


def test_cors_is_off_unless_origins_are_configured(make_app):
    plain = make_app()
    client = plain.test_client()
    secret = _key(client)
    headers = {"Authorization": f"Bearer {secret}", "Origin": "https://app.example.org"}
    assert "Access-Control-Allow-Origin" not in client.get("/v1/models", headers=headers).headers
    opened = make_app(NUMI_API_CORS_ORIGINS=("https://app.example.org",))
    client = opened.test_client()
    secret = _key(client)
    preflight = client.options(
        "/v1/chat/completions", headers={"Origin": "https://app.example.org"}
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.org"
    answer = client.get("/v1/models", headers={**headers, "Authorization": f"Bearer {secret}"})
    assert answer.headers["Access-Control-Allow-Origin"] == "https://app.example.org"
    other = client.get(
        "/v1/models",
        headers={"Authorization": f"Bearer {secret}", "Origin": "https://evil.example"},
    )
    assert "Access-Control-Allow-Origin" not in other.headers


def test_a_session_cookie_does_not_open_v1(multi_app, users):
    client = multi_app.test_client()
    sign_in(client, users["a"])
    assert client.get("/api/sessions").status_code == 200
    refused = client.get("/v1/models")
    assert refused.status_code == 401 and refused.get_json()["error"]["code"] == "api_key_missing"
    # Nor does the user's /api token.
    token = client.get("/v1/models", headers=users["a"].auth_header)
    assert token.get_json()["error"]["code"] == "api_key_invalid"


def test_one_users_key_never_reaches_another_users_models_or_chats(multi_app, users):
    a, b = multi_app.test_client(), multi_app.test_client()
    sign_in(a, users["a"])
    sign_in(b, users["b"])
    with multi_app.app_context():
        db.session.add(
            Endpoint(
                user_id=users["a"].id,
                name="alices",
                kind="openai_chat",
                base_url="https://api.example.org/v1",
                default_model="m1",
            )
        )
        db.session.add(Chat(user_id=users["a"].id, title="Alice's secret", api_key_id=None))
        db.session.commit()
    bobs = {"Authorization": f"Bearer {_key(b)}"}
    listed = b.get("/v1/models", headers=bobs).get_json()["data"]
    assert all(not m["id"].startswith("alices/") for m in listed)
    refused = b.post(
        "/v1/chat/completions",
        headers=bobs,
        json={"model": "alices/m1", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert refused.status_code == 404 and refused.get_json()["error"]["code"] == "unknown_model"
    # Bob's key is no way into Alice's chats either: it opens /v1 only.
    assert b.get("/api/sessions", headers=bobs).status_code == 401
    assert [c["title"] for c in b.get("/api/sessions").get_json()["sessions"]] == []
    assert a.get("/api/keys").get_json()["keys"] == []


def test_numi_key_create_prints_the_key_once_and_lists_it_by_name(numi_cli):
    made, _ = numi_cli("key", "create", "--name", "laptop script")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("numi-sk-")
    agent, _ = numi_cli("key", "create", "--name", "agent", "--use", "mcp", "--use", "history")
    assert agent.returncode == 0, agent.stderr
    listed, _ = numi_cli("key", "list")
    assert "laptop script" in listed.stdout and secret not in listed.stdout
    assert "agent\t" in listed.stdout and "\thistory,mcp\t" in listed.stdout
