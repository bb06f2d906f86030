"""Endpoint kinds come from one registry that a NUMI_PLUGINS module can add to, the same
hook the built-in kinds and tools register through."""

from __future__ import annotations

import pytest

from numi.providers.kinds import unregister_kind
from numi.services import services

PLUGIN = """
from numi.providers.kinds import EndpointKind, register_kind


def register(app):
    register_kind(EndpointKind("relay_chat", "Relay (Chat Completions)",
                               "numi.providers.openai_chat:OpenAIChatAdapter", "openai"))
"""


@pytest.fixture
def kind_plugin(tmp_path, monkeypatch):
    (tmp_path / "numi_kind_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "numi_kind_plugin"
    unregister_kind("relay_chat")


def _add(client, kind):
    return client.post(
        "/api/endpoints",
        json={"name": f"via {kind}", "kind": kind, "base_url": "https://relay.example.test/v1"},
    )


def test_a_plugin_kind_is_offered_accepted_and_served(make_app, kind_plugin):
    before = make_app().test_client()
    refused = _add(before, "relay_chat")
    assert refused.status_code == 400 and refused.get_json()["error"]["code"] == "unknown_kind"

    app = make_app(NUMI_PLUGINS=(kind_plugin,))
    client = app.test_client()
    page = client.get("/settings/endpoints").get_data(as_text=True)
    assert '<option value="relay_chat">Relay (Chat Completions)</option>' in page
    assert '<option value="anthropic">Anthropic Messages</option>' in page
    created = _add(client, "relay_chat")
    assert created.status_code == 201 and created.get_json()["kind"] == "relay_chat"
    card = client.get(f"/settings/endpoints/{created.get_json()['id']}/edit").get_data(as_text=True)
    assert '<option value="relay_chat" selected>Relay (Chat Completions)</option>' in card

    from numi.providers import adapter_class

    assert adapter_class("relay_chat").__name__ == "OpenAIChatAdapter"


def test_the_built_in_tools_arrive_through_the_plugin_hook(make_app):
    names = services(make_app()).tools.names()
    assert {"current_time", "web_search", "fetch_page", "bash", "search_documents"} <= set(names)
