"""A model silent before its first token (issue 35): a server that never sends its
response headers, or sends them and then no token, is cut after its own short deadline
and not asked again; the chat's fallback answers at once and the answer says why. A live
server, the scripted provider through the real SDKs, real WebSocket clients."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, chat_with_backup, of_type, run_turn, turn_server_env, types


@pytest.fixture(scope="module")
def server(live_server_factory):
    # Retries stay at their default (2): a silent model must not use them. No idle
    # deadline: only the two deadlines under test can cut the stream.
    deadlines = {"IDLE": "0", "HEADERS": "0.5", "FIRST_TOKEN": "0.8"}
    env = {f"NUMI_PROVIDER_{name}_SECONDS": value for name, value in deadlines.items()}
    return live_server_factory(**turn_server_env(**env))


@pytest.fixture
def api(server):
    return Api(server.url, token=server.token)


@pytest.mark.parametrize(
    "silence",
    [Scenario().hold_headers().text("too late"), Scenario().keep_alive(0.05).text("too late")],
    ids=["no headers", "headers, then no token"],
)
def test_a_silent_model_hands_the_turn_to_the_fallback_at_once(server, api, scripted, silence):
    chat = chat_with_backup(api, scripted)
    scripted.enqueue(silence, Scenario().text("never asked"), model="primary-model")
    scripted.enqueue(Scenario().text("From the backup."), model="backup-model")

    events = run_turn(server, chat["id"])

    assert "error" not in types(events), events
    route = of_type(events, "model_route")[0]["data"]
    assert route["model"] == "backup-model" and route["reason"] == "provider_timeout"
    assert route["notice"].endswith("primary-model sent nothing before its deadline")
    # One request to the silent model, none of its retries, then the backup's.
    assert [r.model for r in scripted.requests if r.protocol] == ["primary-model", "backup-model"]
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "From the backup." and answer["meta"]["model"] == "backup-model"
    assert answer["meta"]["fallback"]["failures"][0]["code"] == "provider_timeout"
