"""The gateway's live server: `numi serve` with two endpoints on the scripted provider
(`alpha` speaks Chat Completions, `beta` Anthropic Messages; beta's reasoning model is
the user's default fallback) and a key "Zed". One server for the whole folder (package
scope: its modules share it, and each test makes what it needs, e.g. its own key). The
official SDKs are the clients."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fixtures.live_server import LiveServer, server_environment
from turn_support import Api, free_port, turn_server_env


@dataclass
class Gateway:
    server: object
    api: Api
    key: str
    key_id: int
    alpha: dict
    beta: dict

    @property
    def openai_base(self) -> str:
        return self.server.url + "/v1"

    def openai(self, key: str | None = None):
        import openai

        return openai.OpenAI(base_url=self.openai_base, api_key=key or self.key, max_retries=0)

    def anthropic(self, key: str | None = None):
        import anthropic

        return anthropic.Anthropic(base_url=self.server.url, api_key=key or self.key, max_retries=0)

    def new_key(self, **fields) -> tuple[str, int]:
        status, body = self.api.post("/api/keys", {"name": "test", **fields})
        assert status == 201, body
        return body["secret"], body["key"]["id"]


@pytest.fixture(scope="package")
def gateway(tmp_path_factory, database_templates, provider):
    data_dir = tmp_path_factory.mktemp("gateway") / "data"
    database_templates.sqlite_copy(data_dir / "numi.db")
    port = free_port()
    env = {
        "NUMI_TEST_FAST_PASSWORD_HASHES": "1",
        **turn_server_env(
            NUMI_API_RATE_PER_MINUTE="600",
            NUMI_API_MAX_MESSAGES="50",
            NUMI_API_MAX_BODY_BYTES="262144",
        ),
    }
    server = LiveServer(data_dir, port, server_environment(data_dir, port, **env))
    server.start()
    api = Api(server.url, token=server.token)
    endpoints = {}
    for name, kind, base in (
        ("alpha", "openai_chat", provider.openai_base_url),
        ("beta", "anthropic", provider.anthropic_base_url),
    ):
        status, endpoint = api.post(
            "/api/endpoints",
            {
                "name": name,
                "kind": kind,
                "base_url": base,
                "api_key": "k",
                "default_model": "scripted-model",
            },
        )
        assert status == 201, endpoint
        endpoints[name] = endpoint
    status, body = api.call(
        "PUT",
        "/api/fallbacks",
        {"fallbacks": [{"endpoint_id": endpoints["beta"]["id"], "model": "scripted-reasoning"}]},
    )
    assert status in (200, 204), body
    status, made = api.post("/api/keys", {"name": "Zed"})
    assert status == 201, made
    yield Gateway(
        server, api, made["secret"], made["key"]["id"], endpoints["alpha"], endpoints["beta"]
    )
    server.stop()
