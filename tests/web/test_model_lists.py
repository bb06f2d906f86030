"""Every model an endpoint lists reaches the pickers (issue 25 item 4): the list is fetched
when an endpoint is added (the CLI, the API; Settings and edits in test_endpoint_servers),
refreshed in the background when a page finds it stale (the page never waits), and a
failed fetch keeps the old list and says why. Nothing is preselected that lists no
models. The scripted provider answers /models through the real openai SDK."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest

from numi.testing import ScriptedProvider
from server_wait import WAIT_SECONDS

MODELS = [{"id": "alpha-model"}, {"id": "beta-model"}, {"id": "gamma-model"}]


@pytest.fixture
def provider():
    with ScriptedProvider(models=list(MODELS)) as server:
        yield server


def add(client, provider, name="scripted", **fields):
    response = client.post(
        "/api/endpoints",
        json={"name": name, "kind": "openai_chat", "base_url": provider.openai_base_url, **fields},
    )
    assert response.status_code == 201, response.json
    return response.json


def listed(client, endpoint_id):
    endpoints = client.get("/api/endpoints").json["endpoints"]
    return next(e for e in endpoints if e["id"] == endpoint_id)


def make_stale(app, endpoint_id):
    from numi.extensions import db
    from numi.models import Endpoint, utcnow

    with app.app_context():
        endpoint = db.session.get(Endpoint, endpoint_id)
        endpoint.models_fetched_at = utcnow() - timedelta(
            seconds=app.config["NUMI_MODELS_CACHE_SECONDS"] + 60
        )
        db.session.commit()
        db.session.remove()


def selected_route(page: str) -> str:
    """The value of the selected option of the page's first model picker."""
    select = re.search(r'<select name="route".*?</select>', page, re.S).group(0)
    return html.unescape(re.search(r'<option value="([^"]*)"[^>]*\sselected[\s>]', select).group(1))


def test_an_endpoint_added_by_the_api_lists_every_model_without_a_test(sqlite_client, provider):
    endpoint = add(sqlite_client, provider)  # no default model, no "Test & refresh"

    assert endpoint["models"] == ["alpha-model", "beta-model", "gamma-model"]
    assert endpoint["models_problem"] is None
    assert [r.path for r in provider.listings] == ["/v1/models"]
    page = sqlite_client.get("/").get_data(as_text=True)
    for model in ("alpha-model", "beta-model", "gamma-model"):
        assert f'<option value="{endpoint["id"]}:{model}" data-model="{model}"' in page
        assert f'<span class="picker-name">{model}</span>' in page


def test_a_stale_list_is_refreshed_in_the_background_of_a_page_view(
    sqlite_app, sqlite_client, provider
):
    from numi.endpoints import wait_for_refreshes

    endpoint = add(sqlite_client, provider, default_model="alpha-model")
    make_stale(sqlite_app, endpoint["id"])
    provider.models = [*MODELS, {"id": "delta-model"}]
    provider.listings.clear()

    page = sqlite_client.get("/").get_data(as_text=True)
    # The page did not wait for the provider: it shows the list as it was.
    assert "delta-model" not in page
    wait_for_refreshes(sqlite_app, timeout=WAIT_SECONDS)
    assert [r.path for r in provider.listings] == ["/v1/models"]
    assert listed(sqlite_client, endpoint["id"])["models"][-1] == "delta-model"
    assert '<span class="picker-name">delta-model</span>' in sqlite_client.get("/").get_data(
        as_text=True
    )
    # Fresh now: the next views ask nothing.
    sqlite_client.get("/")
    wait_for_refreshes(sqlite_app, timeout=WAIT_SECONDS)
    assert len(provider.listings) == 1


def test_a_failed_refresh_keeps_the_list_and_says_why(sqlite_app, sqlite_client, provider):
    from numi.endpoints import wait_for_refreshes

    endpoint = add(sqlite_client, provider, default_model="alpha-model")
    provider.api_key = "another-key"  # the server now refuses this endpoint's (missing) key

    # Asked for at once ("Test & refresh", the API): the error, and the list stays.
    response = sqlite_client.get(f"/api/endpoints/{endpoint['id']}/models?refresh=1")
    assert response.status_code == 502
    assert response.json["error"]["code"] == "provider_auth"
    after = listed(sqlite_client, endpoint["id"])
    assert after["models"] == ["alpha-model", "beta-model", "gamma-model"]
    problem = after["models_problem"]
    assert problem and problem == response.json["error"]["message"]

    # In the background: nothing raised, the list kept, the reason shown where it matters.
    make_stale(sqlite_app, endpoint["id"])
    provider.listings.clear()
    sqlite_client.get("/")
    wait_for_refreshes(sqlite_app, timeout=WAIT_SECONDS)
    assert [r.path for r in provider.listings] == ["/v1/models"]
    assert listed(sqlite_client, endpoint["id"])["models"] == after["models"]
    note = html.escape(f"Model list not refreshed: {problem}")
    assert note in sqlite_client.get("/settings/endpoints").get_data(as_text=True)
    page = sqlite_client.get("/").get_data(as_text=True)
    assert f'<div class="picker-note" aria-hidden="true">{note}</div>' in page
    assert selected_route(page) == f"{endpoint['id']}:alpha-model", "a kept list still answers"

    provider.api_key = None  # fixed: the next fetch clears the problem
    assert sqlite_client.get(f"/api/endpoints/{endpoint['id']}/models?refresh=1").status_code == 200
    assert listed(sqlite_client, endpoint["id"])["models_problem"] is None


def test_nothing_is_preselected_that_lists_no_models(sqlite_client, provider):
    with ScriptedProvider(models=[]) as empty:
        nothing = add(sqlite_client, empty, name="A lists nothing")
    assert nothing["models"] == []

    # Only an empty endpoint: no route is chosen, and the picker asks for one.
    page = sqlite_client.get("/").get_data(as_text=True)
    assert selected_route(page) == ""
    assert '<option value="" selected>Choose a model…</option>' in page
    assert f'<option value="{nothing["id"]}:" disabled>(no models listed)</option>' in page
    chat = sqlite_client.post("/api/session", json={}).get_json()
    assert chat["endpoint_id"] is None
    assert selected_route(sqlite_client.get(f"/c/{chat['id']}").get_data(as_text=True)) == ""

    # With one that lists models (sorted after it, no default model): its first model.
    endpoint = add(sqlite_client, provider, name="B lists three")
    assert selected_route(sqlite_client.get("/").get_data(as_text=True)) == (
        f"{endpoint['id']}:alpha-model"
    )
    chat = sqlite_client.post("/api/session", json={}).get_json()
    assert (chat["endpoint_id"], chat["model"]) == (endpoint["id"], "alpha-model")
    # A chat already on the empty endpoint keeps showing it, honestly empty.
    on_empty = sqlite_client.post("/api/session", json={"endpoint_id": nothing["id"]}).get_json()
    page = sqlite_client.get(f"/c/{on_empty['id']}").get_data(as_text=True)
    assert selected_route(page) == f"{nothing['id']}:"


def test_a_picker_kept_by_a_connection_outlives_the_session_its_endpoints_came_from(
    sqlite_app, provider
):
    """A WebSocket connection's context keeps its pickers across its database sessions (the
    HTML view lets its session go after each batch of events). A picker built in one
    session, whose endpoints that session then expired (a commit) and let go, must still
    draw its listbox in the next: it failed with DetachedInstanceError, and the answer's
    fragment never reached the page (a compare turn's "Continue with this" buttons, CI)."""
    from numi.endpoints import create_endpoint, list_endpoints
    from numi.extensions import db
    from numi.identity import local_user
    from numi.web.model_picker import forget_sent_lists, model_picker_html

    with sqlite_app.test_request_context():
        endpoint = create_endpoint(
            None, {"name": "kept", "kind": "openai_chat", "base_url": provider.openai_base_url}
        )
        endpoint.models = MODELS
        db.session.commit()
        chat = {"endpoint_id": endpoint.id, "model": "beta-model"}
        first = model_picker_html(list_endpoints(local_user().id), chat)
        db.session.commit()  # another event of the same batch ends its read: all expired
        db.session.remove()  # the batch is sent: the session is let go

        forget_sent_lists()  # the next batch's fragment
        again = model_picker_html(list_endpoints(local_user().id), chat)
        assert again == first, "the same picker, its listbox drawn again"


def test_cli_add_fetches_every_model(live_server, provider):
    result = live_server.cli("endpoint", "add", "Listed", "--base-url", provider.openai_base_url)

    assert "3 models listed; alpha-model:" in result.stdout
    assert [r.path for r in provider.listings] == ["/v1/models"]
    from turn_support import Api

    endpoints = Api(live_server.url, token=live_server.token).get("/api/endpoints")[1]["endpoints"]
    found = next(e for e in endpoints if e["name"] == "Listed")
    assert found["models"] == ["alpha-model", "beta-model", "gamma-model"]
    assert found["default_model"] == "alpha-model", "the first listed model, for new chats"


def test_alike_pickers_share_one_listbox_and_follow_a_changed_list(sqlite_app, provider):
    """A chat page holds one picker per answer: the listbox they build from is sent once
    per rendered page or fragment, and a list that changes (in a WebSocket connection's
    long-lived context) renders anew."""
    from numi.endpoints import create_endpoint, list_endpoints
    from numi.extensions import db
    from numi.identity import local_user
    from numi.web.model_picker import forget_sent_lists, model_picker_html

    with sqlite_app.test_request_context():
        endpoint = create_endpoint(
            None, {"name": "alike", "kind": "openai_chat", "base_url": provider.openai_base_url}
        )
        endpoint.models = MODELS
        db.session.commit()
        endpoints = list_endpoints(local_user().id)
        chat = {"endpoint_id": endpoint.id, "model": "beta-model"}
        first, second = model_picker_html(endpoints, chat), model_picker_html(endpoints, chat)
        list_id = re.search(r'data-list="([^"]+)"', first).group(1)
        assert first.count(f'<template id="{list_id}">') == 1
        assert f'data-list="{list_id}"' in second and "<template" not in second
        assert first.count('data-model="beta-model" selected') == 1

        forget_sent_lists()  # the next fragment of the connection
        endpoint.hidden_models = ["gamma-model"]
        db.session.commit()
        changed = model_picker_html(endpoints, chat)
        assert "<template" in changed and list_id not in changed
        assert "gamma-model" not in changed
        db.session.remove()


def test_an_endpoint_that_never_answered_is_not_preselected(sqlite_app, sqlite_client, provider):
    """A just-added endpoint nothing listens on keeps its typed default model, but the home
    picker does not choose it: it has never answered. It is chosen once one of the user's
    chats got an answer from it (a gateway whose model list fails but whose chats work)."""
    from numi.extensions import db
    from numi.models import Chat, Message
    from turn_support import free_port

    down = add(
        sqlite_client,
        provider,
        name="A unreachable",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        default_model="typed-model",
    )
    assert down["models"] == [] and down["models_problem"]
    assert down["default_model"] == "typed-model"
    assert selected_route(sqlite_client.get("/").get_data(as_text=True)) == ""

    # With one that answered (sorted after it): that one, not the unreachable default.
    up = add(sqlite_client, provider, name="B answers")
    assert (
        selected_route(sqlite_client.get("/").get_data(as_text=True)) == f"{up['id']}:alpha-model"
    )

    # A failed answer on the unreachable one is no answer; a real one is.
    chat = sqlite_client.post("/api/session", json={"endpoint_id": down["id"]}).get_json()
    with sqlite_app.app_context():
        db.session.add(
            Message(chat_id=chat["id"], role="assistant", content="", meta={"error": {"code": "x"}})
        )
        db.session.commit()
    assert (
        selected_route(sqlite_client.get("/").get_data(as_text=True)) == f"{up['id']}:alpha-model"
    )
    with sqlite_app.app_context():
        db.session.add(Message(chat_id=chat["id"], role="assistant", content="It works."))
        assert db.session.get(Chat, chat["id"]).endpoint_id == down["id"]
        db.session.commit()
    page = sqlite_client.get("/").get_data(as_text=True)
    assert selected_route(page) == f"{down['id']}:typed-model"
