"""Endpoints of real local servers (issue 23 items 2, 4, 7): the model list is fetched
when an endpoint is added and kept across edits, so a llama-server's allocated context
and its template's tool support count from the first turn; the user's per-model
settings and the retries switch are saved and checked. The scripted provider answers
with llama-server's and LiteLLM's recorded bodies (numi/testing/recordings.py)."""

from __future__ import annotations

import pytest

from numi.testing import recordings as rec


def llama_server(scripted):
    scripted.models_body = rec.LLAMA_SERVER_MODELS
    scripted.props = rec.LLAMA_SERVER_PROPS
    return scripted


def add(client, scripted, name="llama", **fields):
    response = client.post(
        "/api/endpoints",
        json={
            "name": name,
            "kind": "openai_chat",
            "base_url": scripted.openai_base_url,
            "default_model": "llama-tool",
            **fields,
        },
    )
    assert response.status_code == 201, response.json
    return response.json


def capabilities_of(app, endpoint_id, model="llama-tool"):
    from numi.endpoints import model_capabilities
    from numi.extensions import db
    from numi.models import Endpoint

    with app.app_context():
        return model_capabilities(db.session.get(Endpoint, endpoint_id), model)


def test_adding_an_endpoint_with_a_default_model_fetches_its_context_and_tools(
    app, client, scripted
):
    endpoint = add(client, llama_server(scripted))

    assert endpoint["models"] == ["llama-tool"]
    assert [r.path for r in scripted.listings] == ["/v1/models", "/props"]
    caps = capabilities_of(app, endpoint["id"])
    # Before: 32,768 assumed and no tools (the "llama" family rule); the server says 8192.
    assert (caps.context_window, caps.tools) == (8192, True)
    assert caps.sources["context_window"] == caps.sources["tools"] == "reported"


def test_the_settings_form_fetches_the_list_with_a_default_model_too(sqlite_client, scripted):
    llama_server(scripted)
    response = sqlite_client.post(
        "/settings/endpoints",
        data={
            "name": "form",
            "kind": "openai_chat",
            "base_url": scripted.openai_base_url,
            "default_model": "llama-tool",
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    listed = sqlite_client.get("/api/endpoints").json["endpoints"]
    assert [e["models"] for e in listed if e["name"] == "form"] == [["llama-tool"]]


def test_litellm_max_input_tokens_counts_in_the_chat_kind(app, client, scripted):
    scripted.models_body = rec.LITELLM_MODELS

    endpoint = add(client, scripted, name="gateway")

    caps = capabilities_of(app, endpoint["id"])
    assert (caps.context_window, caps.tools, caps.vision) == (8192, True, False)


def test_edits_keep_the_fetched_list_and_another_connection_fetches_again(app, client, scripted):
    endpoint = add(client, llama_server(scripted))
    scripted.listings.clear()

    for change in ({"hidden_models": ["llama-tool"]}, {"name": "renamed"}, {"retries": False}):
        response = client.patch(f"/api/endpoints/{endpoint['id']}", json=change)
        assert response.status_code == 200, response.json
        assert response.json["models"] == ["llama-tool"], change
    assert scripted.listings == []  # nothing to fetch: the list is kept as it was

    scripted.models_body = None  # "another server": the scripted default list
    moved = client.patch(f"/api/endpoints/{endpoint['id']}", json={"kind": "openai_responses"}).json
    assert moved["models"] == ["scripted-model", "scripted-reasoning"]
    # The new server does not list llama-tool: nothing reported of it is kept.
    assert capabilities_of(app, endpoint["id"]).sources["context_window"] == "family"


def test_per_model_settings_override_the_server_and_are_checked(app, client, scripted):
    endpoint = add(client, llama_server(scripted))
    url = f"/api/endpoints/{endpoint['id']}"

    saved = client.patch(
        url,
        json={
            "retries": False,
            "model_capabilities": {
                "llama-tool": {"tools": False, "context_window": 4096, "vision": None}
            },
        },
    ).json
    assert saved["retries"] is False
    assert saved["model_capabilities"] == {"llama-tool": {"tools": False, "context_window": 4096}}
    caps = capabilities_of(app, endpoint["id"])
    assert (caps.tools, caps.context_window) == (False, 4096)
    assert caps.sources["tools"] == "override"

    for bad in (
        {"model_capabilities": {"llama-tool": {"tools": "yes"}}},
        {"model_capabilities": {"llama-tool": {"colour": True}}},
        {"model_capabilities": {"llama-tool": {"context_window": 12}}},
        {"model_capabilities": ["llama-tool"]},
    ):
        response = client.patch(url, json=bad)
        assert response.status_code == 400, bad
        assert response.json["error"]["code"] == "invalid_capabilities"
    response = client.patch(url, json={"retries": "maybe"})
    assert response.status_code == 400 and response.json["error"]["code"] == "invalid_input"
    after = client.get("/api/endpoints").json["endpoints"][0]
    assert after["model_capabilities"] == saved["model_capabilities"] and after["retries"] is False


@pytest.mark.parametrize("name", ["llama-tool", "llamacpp-qwen3", "llama3-groq-tool-use"])
def test_a_llama_name_alone_no_longer_takes_the_tools_away(name):
    from numi.providers import capabilities

    caps = capabilities(name)
    assert caps.tools and caps.sources["tools"] == "default"


def test_cli_add_fetches_the_list_and_says_what_counts(live_server, scripted):
    llama_server(scripted)

    result = live_server.cli(
        "endpoint",
        "add",
        "Local llama",
        "--base-url",
        scripted.openai_base_url,
        "--default-model",
        "llama-tool",
    )

    assert "1 model listed; llama-tool: context 8,192 tokens (reported)" in result.stdout
    assert "tools on (reported)" in result.stdout
    unreachable = live_server.cli(
        "endpoint", "add", "Gone", "--base-url", "http://127.0.0.1:9/v1", "--default-model", "m"
    )
    assert "Added endpoint Gone" in unreachable.stdout
    assert "Models not fetched (Could not connect" in unreachable.stdout
