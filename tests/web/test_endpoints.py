"""Endpoints: added through the API and the settings page; the API key never comes back."""

from __future__ import annotations

import socket

import pytest

from numi.extensions import db
from numi.models import Endpoint

SECRET = "sk-test-SECRET-never-shown-4f9a2c"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_api_key_is_never_rendered_back(client, app):
    created = client.post(
        "/api/endpoints",
        json={
            "name": "Paid",
            "kind": "openai_chat",
            "base_url": "https://api.example.test/v1",
            "api_key": SECRET,
            "default_model": "gpt-x",
        },
    )
    assert created.status_code == 201
    endpoint = created.get_json()
    assert endpoint["has_api_key"] is True and "api_key" not in endpoint
    form = client.post(
        "/settings/endpoints",
        data={
            "name": "Paid form",
            "kind": "anthropic",
            "base_url": "https://api.anthropic.example.test",
            "api_key": SECRET + "-form",
        },
    )
    assert form.status_code == 302
    with app.app_context():  # stored, so the check below is not vacuous
        assert {e.api_key for e in db.session.execute(db.select(Endpoint)).scalars()} == {
            SECRET,
            SECRET + "-form",
        }

    chat = client.post("/api/session", json={"endpoint_id": endpoint["id"]}).get_json()
    hx = {"HX-Request": "true"}
    responses = {
        "created": created,
        "list": client.get("/api/endpoints"),
        "patched": client.patch(
            f"/api/endpoints/{endpoint['id']}", json={"default_model": "gpt-y"}
        ),
        "session": client.get(f"/api/session/{chat['id']}"),
        "sessions": client.get("/api/sessions"),
        "index": client.get("/"),
        "chat page": client.get(f"/c/{chat['id']}"),
        "settings": client.get("/settings/endpoints"),
        "settings fragment": client.post(
            "/settings/endpoints",
            headers=hx,
            data={
                "name": "Third",
                "kind": "openai_responses",
                "base_url": "https://x.example.test/v1",
                "api_key": SECRET,
            },
        ),
        "header fragment": client.post(
            f"/c/{chat['id']}/settings", data={"system_prompt": "x"}, headers=hx
        ),
    }
    for name, response in responses.items():
        assert response.status_code in (200, 201), name
        body = response.get_data(as_text=True)
        assert SECRET not in body, f"API key leaked in {name}"
        assert "sk-test" not in body, f"part of the API key leaked in {name}"
    assert "Paid form" in responses["settings"].get_data(as_text=True)
    assert "key set" in responses["settings"].get_data(as_text=True)


def test_list_and_remove(client):
    for name in ("B local", "A local"):
        assert (
            client.post(
                "/api/endpoints",
                json={"name": name, "kind": "openai_chat", "base_url": "http://127.0.0.1:11434/v1"},
            ).status_code
            == 201
        )
    listed = client.get("/api/endpoints").get_json()["endpoints"]
    assert [e["name"] for e in listed] == ["A local", "B local"]
    assert {"id", "name", "kind", "base_url", "default_model"} <= set(listed[0])
    duplicate = client.post(
        "/api/endpoints",
        json={"name": "A local", "kind": "openai_chat", "base_url": "http://127.0.0.1:1/v1"},
    )
    assert (
        duplicate.status_code == 409 and duplicate.get_json()["error"]["code"] == "duplicate_name"
    )
    removed = client.post(
        f"/settings/endpoints/{listed[0]['id']}/delete", headers={"HX-Request": "true"}
    )
    assert removed.status_code == 200 and "A local" not in removed.get_data(as_text=True)
    assert [e["name"] for e in client.get("/api/endpoints").get_json()["endpoints"]] == ["B local"]


def test_unreachable_endpoint_gives_a_clear_error(client):
    port = _closed_port()
    endpoint = client.post(
        "/api/endpoints",
        json={
            "name": "Nobody home",
            "kind": "openai_chat",
            "base_url": f"http://127.0.0.1:{port}/v1",
        },
    ).get_json()
    response = client.get(f"/api/endpoints/{endpoint['id']}/models")
    assert 400 <= response.status_code < 600 and response.status_code != 500
    error = response.get_json()["error"]
    assert error["code"] == "provider_unavailable"
    assert error["message"] and "Traceback" not in error["message"]
    # The settings page's "Test & refresh models" button shows the message in place.
    fragment = client.post(
        f"/settings/endpoints/{endpoint['id']}/models", headers={"HX-Request": "true"}
    )
    assert fragment.status_code == 200
    html = fragment.get_data(as_text=True)
    assert "status-error" in html and "Traceback" not in html


# --- API keys at rest ---------------------------------------------------------------------


def _stored_keys(app) -> list[str]:
    """The api_key column as the database holds it (what a copied numi.db or a dump shows)."""
    with app.app_context():
        return [
            row[0]
            for row in db.session.execute(db.text("SELECT api_key FROM endpoints ORDER BY id"))
        ]


def test_api_keys_are_encrypted_at_rest(client, app):
    created = client.post(
        "/api/endpoints",
        json={
            "name": "Paid",
            "kind": "openai_chat",
            "base_url": "https://api.example.test/v1",
            "api_key": SECRET,
        },
    )
    assert created.status_code == 201
    [stored] = _stored_keys(app)
    assert stored.startswith("numi:v1:") and SECRET not in stored
    with app.app_context():
        assert db.session.get(Endpoint, created.get_json()["id"]).api_key == SECRET
    # The same key sealed twice gives two different texts (a fresh nonce each time).
    client.post(
        "/api/endpoints",
        json={
            "name": "Paid 2",
            "kind": "openai_chat",
            "base_url": "https://api.example.test/v1",
            "api_key": SECRET,
        },
    )
    first, second = _stored_keys(app)
    assert first != second


def test_plaintext_keys_from_before_are_encrypted_at_start_up(make_app):
    from numi.database import upgrade

    app = make_app()
    with app.app_context():
        db.session.execute(
            db.text(
                "INSERT INTO endpoints (name, kind, base_url, api_key, reasoning_policy, enabled, created_at) "
                "VALUES ('Old', 'openai_chat', 'https://api.example.test/v1', :key, 'auto', :on, CURRENT_TIMESTAMP)"
            ),
            {"key": SECRET, "on": True},
        )
        db.session.commit()
        assert db.session.execute(db.select(Endpoint)).scalar_one().api_key == SECRET, (
            "legacy plaintext still reads"
        )
    upgrade(app)  # what `numi serve` and `numi db upgrade` run at start
    upgrade(app)  # idempotent: sealed keys are left alone
    [stored] = _stored_keys(app)
    assert stored.startswith("numi:v1:") and SECRET not in stored
    with app.app_context():
        assert db.session.execute(db.select(Endpoint)).scalar_one().api_key == SECRET


def test_a_key_sealed_under_another_secret_is_a_clear_error(make_app):
    from numi.errors import NumiError

    app = make_app()
    with app.app_context():
        db.session.add(
            Endpoint(
                name="Paid",
                kind="openai_chat",
                base_url="https://api.example.test/v1",
                api_key=SECRET,
            )
        )
        db.session.commit()
    other = make_app(NUMI_SECRET_KEY="another-secret-key")
    with other.app_context():
        endpoint = db.session.execute(db.select(Endpoint)).scalar_one()
        assert endpoint.has_api_key
        try:
            endpoint.api_key
        except NumiError as exc:
            assert exc.code == "endpoint_key_unreadable" and SECRET not in exc.message
        else:
            raise AssertionError("a key sealed under another secret must not read as text")


def _add_endpoint(admin_client, route: str, name: str, shared):
    fields = {
        "name": name,
        "kind": "openai_chat",
        "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
    }
    if shared is not None:
        fields["shared"] = shared
    if route == "/api/endpoints":
        return admin_client.post(route, json=fields)
    return admin_client.post(route, data=fields)


def _shared_names(app) -> set[str]:
    with app.app_context():
        return {e.name for e in db.session.query(Endpoint).filter(Endpoint.user_id.is_(None))}


@pytest.mark.parametrize("route", ["/api/endpoints", "/settings/endpoints"])
@pytest.mark.parametrize(
    "shared, is_shared",
    [("false", False), ("0", False), ("off", False), ("", False), (None, False),
     ("true", True), ("1", True), ("on", True)],
)  # fmt: skip
def test_shared_reads_false_as_false(admin_client, multi_app, route, shared, is_shared):
    """Issue 36: an admin posting `"shared": "false"` (or "0") made a shared endpoint, since
    the field was read with bool(); it is read with the app's one yes/no parser."""
    name = f"ep-{route.split('/')[1]}-{shared}"
    response = _add_endpoint(admin_client, route, name, shared)
    assert response.status_code in (200, 201, 302), response.get_data(as_text=True)
    assert (name in _shared_names(multi_app)) is is_shared


def test_shared_as_json_booleans_and_a_refused_word(admin_client, multi_app):
    assert _add_endpoint(admin_client, "/api/endpoints", "json-false", False).status_code == 201
    assert _add_endpoint(admin_client, "/api/endpoints", "json-true", True).status_code == 201
    assert _shared_names(multi_app) == {"json-true"}
    refused = _add_endpoint(admin_client, "/api/endpoints", "maybe", "maybe")
    assert refused.status_code == 400 and refused.get_json()["error"]["code"] == "invalid_input"
    with multi_app.app_context():
        assert db.session.query(Endpoint).filter_by(name="maybe").count() == 0
