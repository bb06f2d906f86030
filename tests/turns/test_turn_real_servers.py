"""Turns against what real servers do (issue 23 items 2, 4, 7): tools are left out only
with a notice that says why, a server's refusal of tools is answered without them, an
endpoint's retries can be turned off, a gateway's 429 without Retry-After is retried
once (issue 44 item 6), and a stale model list is fetched in the background. Live
`numi serve`, the scripted provider through the real SDKs, a real WebSocket client."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from numi.testing import recordings as rec

from turn_support import make_chat, of_type, turn_server_env, types, wait_until

# Ollama's answer to tools for a model whose template has none (OpenAI-compatible API).
OLLAMA_NO_TOOLS = {
    "error": {
        "message": "registry.ollama.ai/library/tinyllama:latest does not support tools",
        "type": "api_error",
        "param": None,
        "code": None,
    }
}


@pytest.fixture(scope="module")
def server(live_server_factory):
    """Retries on (two, the default), so that turning them off per endpoint shows; model
    lists always stale, so that a turn fetches one in the background."""
    started = live_server_factory(
        **turn_server_env(NUMI_PROVIDER_MAX_RETRIES="2", NUMI_MODELS_CACHE_SECONDS="0")
    )
    yield started
    started.stop()


def send(sockets, chat, text="Hi", request_id=None):
    ws = sockets(chat["id"])
    ws.send(type="send", message=text, request_id=request_id or f"{chat['id']}-{text}")
    return ws.events_until("turn_end")


def test_tools_turned_off_for_a_model_are_left_out_with_a_notice(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="quiet-model", settings={"tools": ["echo"]}, name="off")
    status, _ = api.call(
        "PATCH",
        f"/api/endpoints/{chat['endpoint']['id']}",
        {"model_capabilities": {"quiet-model": {"tools": False}}},
    )
    assert status == 200
    scripted.enqueue(Scenario().text("No tools here."))

    events = send(sockets, chat)

    (notice,) = of_type(events, "tools_omitted")
    assert notice["data"]["source"] == "override" and notice["data"]["count"] == 1
    assert "turned off for quiet-model in the endpoint's settings" in notice["data"]["message"]
    assert "tools" not in scripted.requests[-1].body
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "No tools here."
    assert answer["meta"]["metrics"]["tools_omitted"] == "override"


def test_a_llama_named_model_gets_its_tools(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="llama-tool", settings={"tools": ["echo"]}, name="llama")
    scripted.enqueue(Scenario().text("Tools were offered."))

    events = send(sockets, chat)

    assert "tools_omitted" not in types(events) and "done" in types(events)
    assert [t["function"]["name"] for t in scripted.requests[-1].body["tools"]] == ["echo"]


def test_a_server_refusing_tools_is_asked_again_without_them(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="tinyllama", settings={"tools": ["echo"]}, name="ollama")
    scripted.enqueue(Scenario.http_error(400, body=OLLAMA_NO_TOOLS), Scenario().text("Hello!"))

    events = send(sockets, chat)

    (notice,) = of_type(events, "tools_omitted")
    assert notice["data"]["source"] == "refused"
    assert "does not support tools" in notice["data"]["message"]
    assert "error" not in types(events) and "done" in types(events)
    first, second = scripted.requests
    assert "tools" in first.body and "tools" not in second.body
    assert api.history(chat["id"])[-1]["content"] == "Hello!"


@pytest.mark.parametrize("retries, calls", [(True, 3), (False, 1)], ids=["on", "off"])
def test_an_endpoint_can_turn_its_retries_off(server, api, scripted, sockets, retries, calls):
    chat = make_chat(api, scripted, name=f"gateway-{retries}")
    status, _ = api.call("PATCH", f"/api/endpoints/{chat['endpoint']['id']}", {"retries": retries})
    assert status == 200
    limited = Scenario.http_error(
        429,
        body=rec.LITELLM_RATE_LIMIT_BODY,
        headers={**rec.LITELLM_RATE_LIMIT_HEADERS, "retry-after": "0.01"},
    )
    scripted.enqueue(limited, limited, limited)

    events = send(sockets, chat)

    assert of_type(events, "error")[0]["data"]["code"] == "rate_limited"
    assert len(scripted.requests) == calls


def test_a_gateway_429_without_retry_after_is_retried_once(server, api, scripted, sockets):
    # LiteLLM 1.108 sends no Retry-After (issue 44): with retries on, one retry, not two.
    chat = make_chat(api, scripted, name="gateway-litellm")
    limited = Scenario.http_error(
        429, body=rec.LITELLM_RATE_LIMIT_BODY, headers=rec.LITELLM_RATE_LIMIT_HEADERS
    )
    scripted.enqueue(limited, limited, limited)

    events = send(sockets, chat)

    assert of_type(events, "error")[0]["data"]["code"] == "rate_limited"
    assert len(scripted.requests) == 2


def test_a_stale_model_list_is_fetched_in_the_background(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="llama-tool", name="stale")
    assert chat["endpoint"]["models"] == ["scripted-model", "scripted-reasoning"]
    scripted.models_body = rec.LLAMA_SERVER_MODELS  # the server now serves llama-tool
    scripted.props = rec.LLAMA_SERVER_PROPS
    scripted.listings.clear()
    scripted.enqueue(Scenario().text("Hi."))

    send(sockets, chat)

    def listed():
        _, body = api.get("/api/endpoints")
        found = next(e for e in body["endpoints"] if e["id"] == chat["endpoint"]["id"])
        return found["models"] == ["llama-tool"]

    wait_until(listed, what="the background model list")
    assert [r.path for r in scripted.listings] == ["/v1/models", "/props"]
