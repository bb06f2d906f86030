"""Editing endpoints: the API (PATCH), the Settings form (HTMX in place), the CLI; the key
is replaced only and never shown; hidden models leave the pickers; the Add form resets."""

from __future__ import annotations

import re
from types import SimpleNamespace

from numi.extensions import db
from numi.models import Endpoint

SECRET = "sk-test-EDIT-never-shown-7c1d"
HX = {"HX-Request": "true"}


def _endpoint(client, **fields) -> dict:
    body = {
        "name": "Paid",
        "kind": "openai_chat",
        "base_url": "https://api.example.test/v1",
        "api_key": SECRET,
        "default_model": "gpt-x",
        **fields,
    }
    response = client.post("/api/endpoints", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _stored(app, endpoint_id: int) -> SimpleNamespace:
    """The stored row's fields (the key decrypted: that needs the app)."""
    with app.app_context():
        endpoint = db.session.get(Endpoint, endpoint_id)
        return SimpleNamespace(
            **{
                name: getattr(endpoint, name)
                for name in (
                    "name",
                    "base_url",
                    "default_model",
                    "reasoning_policy",
                    "enabled",
                    "hidden_models",
                    "api_key",
                )
            }
        )


def test_patch_edits_every_field_and_keeps_the_key_unless_replaced(client, app):
    endpoint = _endpoint(client)
    response = client.patch(
        f"/api/endpoints/{endpoint['id']}",
        json={
            "name": "Renamed",
            "base_url": "https://other.example.test/v1",
            "default_model": "gpt-y",
            "reasoning_policy": "strip",
            "enabled": False,
            "api_key": "",
            "hidden_models": ["a", "b", "a", " "],
        },
    )
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (
        body["name"],
        body["base_url"],
        body["default_model"],
        body["reasoning_policy"],
        body["enabled"],
        body["hidden_models"],
        body["has_api_key"],
    ) == ("Renamed", "https://other.example.test/v1", "gpt-y", "strip", False, ["a", "b"], True)
    assert SECRET not in response.get_data(as_text=True)
    assert _stored(app, endpoint["id"]).api_key == SECRET  # empty = keep
    client.patch(f"/api/endpoints/{endpoint['id']}", json={"api_key": "sk-new"})
    assert _stored(app, endpoint["id"]).api_key == "sk-new"  # replaced


def test_bad_edits_change_nothing(client, app):
    endpoint = _endpoint(client)
    _endpoint(client, name="Other")
    before = client.get("/api/endpoints").get_json()
    for fields, code, status in (
        ({"name": "Other"}, "duplicate_name", 409),
        ({"name": "  "}, "invalid_input", 400),
        ({"base_url": "ftp://x"}, "invalid_url", 400),
        ({"reasoning_policy": "sometimes"}, "invalid_input", 400),
        ({"hidden_models": "gpt-x"}, "invalid_input", 400),
        ({"name": "ok", "hidden_models": [1]}, "invalid_input", 400),
    ):
        response = client.patch(f"/api/endpoints/{endpoint['id']}", json=fields)
        assert (response.status_code, response.get_json()["error"]["code"]) == (status, code), (
            fields
        )
    assert client.get("/api/endpoints").get_json() == before
    assert client.patch("/api/endpoints/999999", json={"name": "x"}).status_code == 404


def test_settings_edit_form_in_place_and_hidden_models_leave_the_picker(client, app):
    endpoint = _endpoint(client)
    with app.app_context():
        stored = db.session.get(Endpoint, endpoint["id"])
        stored.models = [{"id": "gpt-x"}, {"id": "gpt-y"}, {"id": "old-model"}]
        db.session.commit()
    form = client.get(f"/settings/endpoints/{endpoint['id']}/edit", headers=HX).get_data(
        as_text=True
    )
    assert (
        f'id="endpoint-{endpoint["id"]}"' in form and 'value="https://api.example.test/v1"' in form
    )
    assert SECRET not in form and 'name="api_key"' in form  # the key field is always empty
    saved = client.post(
        f"/settings/endpoints/{endpoint['id']}",
        headers=HX,
        data={
            "name": "Edited <b>",
            "kind": "openai_chat",
            "base_url": "https://api.example.test/v2",
            "api_key": "",
            "default_model": "gpt-y",
            "reasoning_policy": "preserve",
            "enabled": "0",
            "hidden_models_sent": "1",
            "hidden_models": ["old-model"],
        },
    )
    assert saved.status_code == 200
    html = saved.get_data(as_text=True)
    assert (
        "Edited &lt;b&gt;" in html
        and "Saved." in html
        and "1 hidden" in html
        and "disabled" in html
    )
    stored = _stored(app, endpoint["id"])
    assert (
        stored.name,
        stored.base_url,
        stored.default_model,
        stored.reasoning_policy,
        stored.enabled,
        stored.hidden_models,
        stored.api_key,
    ) == (
        "Edited <b>",
        "https://api.example.test/v2",
        "gpt-y",
        "preserve",
        False,
        ["old-model"],
        SECRET,
    )
    # The checkbox after its hidden "0" turns it back on; the pickers leave hidden models out.
    client.post(
        f"/settings/endpoints/{endpoint['id']}",
        headers=HX,
        data={"enabled": ["0", "1"], "hidden_models_sent": "1", "hidden_models": ["old-model"]},
    )
    assert _stored(app, endpoint["id"]).enabled is True
    with app.app_context():  # a new base URL dropped the cached list: list the models again
        stored = db.session.get(Endpoint, endpoint["id"])
        assert stored.models == []
        stored.models = [{"id": "gpt-x"}, {"id": "gpt-y"}, {"id": "old-model"}]
        db.session.commit()
    page = client.get("/").get_data(as_text=True)
    options = re.findall(r'<option value="%d:([^"]*)"' % endpoint["id"], page)
    assert options and "old-model" not in options and "gpt-x" in options
    # Cancel shows the card again.
    card = client.get(f"/settings/endpoints/{endpoint['id']}", headers=HX).get_data(as_text=True)
    assert "Edit" in card and "<form" not in card.split("endpoint-actions")[0]


def test_add_form_comes_back_empty(client):
    response = client.post(
        "/settings/endpoints",
        headers=HX,
        data={
            "name": "Fresh",
            "kind": "openai_chat",
            "base_url": "https://fresh.example.test/v1",
            "api_key": SECRET,
            "default_model": "fresh-model",
        },
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'id="endpoint-add-form" hx-swap-oob="true"' in html
    form = html[html.index('id="endpoint-add-form"') :]
    assert SECRET not in html and "fresh-model" not in form and 'value="Fresh"' not in form


def test_cli_edit(live_server):
    live_server.cli("endpoint", "add", "Editable", "--base-url", "http://127.0.0.1:9/v1")
    result = live_server.cli(
        "endpoint",
        "edit",
        "Editable",
        "--name",
        "Edited",
        "--default-model",
        "m2",
        "--disable",
        "--api-key-stdin",
        input=SECRET + "\n",
    )
    assert (
        "Updated endpoint Edited" in result.stdout and SECRET not in result.stdout + result.stderr
    )
    listed = live_server.cli("endpoint", "list").stdout
    assert "Edited" in listed and "m2" in listed and SECRET not in listed
    failed = live_server.cli("endpoint", "edit", "Missing", "--name", "x", check=False)
    assert failed.returncode != 0 and "No shared endpoint named 'Missing'" in failed.stderr
    failed = live_server.cli("endpoint", "edit", "Edited", "--base-url", "nope", check=False)
    assert failed.returncode != 0 and "invalid_url" in failed.stderr
    assert (
        live_server.cli("endpoint", "edit", "Edited", check=False).returncode != 0
    )  # nothing to change
