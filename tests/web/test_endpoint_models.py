"""Model listing against the scripted provider: the picker says what a model can do, and
the connection test names a default model the endpoint does not offer."""

from __future__ import annotations

import pytest

from numi.testing import ScriptedProvider


@pytest.fixture(scope="module")
def provider():
    with ScriptedProvider(
        models=[{"id": "gpt-4o"}, {"id": "llama3.1:8b"}, {"id": "deepseek-r1:7b"}]
    ) as server:
        yield server


def _endpoint(client, provider, default_model):
    response = client.post(
        "/api/endpoints",
        json={
            "name": f"scripted {default_model}",
            "kind": "openai_chat",
            "base_url": provider.openai_base_url,
            "default_model": default_model,
        },
    )
    assert response.status_code == 201, response.json
    return response.json


def test_test_button_lists_models_and_picker_shows_capabilities(sqlite_client, provider):
    endpoint = _endpoint(sqlite_client, provider, "gpt-4o")
    page = sqlite_client.post(
        f"/settings/endpoints/{endpoint['id']}/models", headers={"HX-Request": "true"}
    )
    assert "Connected: 3 models available." in page.get_data(as_text=True)
    chat = sqlite_client.post(
        "/api/session", json={"endpoint_id": endpoint["id"], "model": "gpt-4o"}
    ).json
    html = sqlite_client.get(f"/c/{chat['id']}").get_data(as_text=True)
    # The native select says it in words (no script), the listbox as hints.
    assert "gpt-4o · tools · vision · 128K context" in html
    assert "deepseek-r1:7b · reasoning" in html
    assert (
        '<span class="picker-name">deepseek-r1:7b</span><span class="picker-hint">reasoning' in html
    )


def test_test_button_names_a_default_model_the_endpoint_lacks(sqlite_client, provider):
    endpoint = _endpoint(sqlite_client, provider, "no-such-model")
    page = sqlite_client.post(
        f"/settings/endpoints/{endpoint['id']}/models", headers={"HX-Request": "true"}
    )
    text = page.get_data(as_text=True)
    assert "does not offer the model" in text and "no-such-model" in text


def test_first_start_adds_endpoints_from_the_environment_once(sqlite_app):
    from numi.endpoint_detection import detect_from_environment
    from numi.endpoints import (
        find_by_name,
        list_endpoints,
        remove_endpoint,
    )
    from numi.extensions import db
    from numi.identity import local_user

    environ = {
        "OPENAI_API_KEY": "sk-env-secret",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ANTHROPIC_API_KEY": "sk-ant-secret",
    }
    with sqlite_app.test_request_context():
        found = detect_from_environment(environ)
        assert {(e.name, e.kind, e.base_url) for e in found} >= {
            ("OpenAI", "openai_chat", "http://127.0.0.1:9/v1"),
            ("Anthropic", "anthropic", "https://api.anthropic.com"),
        }
        assert all(e.user_id is None for e in found), "discovered endpoints are shared"
        user_id = local_user().id
        assert {e.name for e in list_endpoints(user_id)} >= {"OpenAI", "Anthropic"}
        db.session.remove()
    page = sqlite_app.test_client().get("/settings/endpoints").get_data(as_text=True)
    assert "OpenAI" in page and "sk-env-secret" not in page and "sk-ant-secret" not in page
    with sqlite_app.test_request_context():
        # The user removes what was found; the next start does not bring it back.
        for name in ("OpenAI", "Anthropic"):
            remove_endpoint(find_by_name(None, name))
        assert detect_from_environment(environ) == []
        assert not {e.name for e in list_endpoints(user_id)} & {"OpenAI", "Anthropic"}
        db.session.remove()
