"""Fallback chains on both databases: each failure class before any output hands the turn
to the next route, which says so in words (transcript, meta, exports); output that began
never switches; the chain's bad inputs change nothing. A live server, the scripted
provider through the real SDKs, real WebSocket clients."""

from __future__ import annotations

import urllib.request

import pytest

from numi.testing import Scenario
from turn_support import (
    Api,
    chat_with_backup,
    free_port,
    make_chat,
    of_type,
    run_turn,
    turn_server_env,
    types,
)


@pytest.fixture(scope="module")
def server(live_server_factory, module_database_url):
    started = live_server_factory(
        **turn_server_env(
            NUMI_DATABASE_URL=module_database_url,
            # One retry: "429 after its retries" is two 429s; the idle deadline is short so a
            # silent server fails fast.
            NUMI_PROVIDER_MAX_RETRIES="1",
            NUMI_PROVIDER_IDLE_SECONDS="0.6",
        )
    )
    yield started
    started.stop()


@pytest.fixture
def api(server):
    return Api(server.url, token=server.token)


FAILURES = [
    # (failure class, scenarios the primary answers with (one per attempt), the code, the words)
    ("auth", [Scenario.http_error(401)], "provider_auth", "primary-model returned 401"),
    ("404 model", [Scenario.http_error(404)], "model_not_found", "primary-model returned 404"),
    (
        "429 after its retries",
        [Scenario.http_error(429, retry_after=0), Scenario.http_error(429, retry_after=0)],
        "rate_limited",
        "primary-model returned 429",
    ),
    (
        "5xx",
        [Scenario.http_error(529, retry_after=0), Scenario.http_error(529, retry_after=0)],
        "provider_unavailable",
        "primary-model returned 529",
    ),
    (
        "idle before the first token",
        [Scenario().keep_alive(0.05), Scenario().keep_alive(0.05)],
        "provider_timeout",
        "primary-model sent nothing before its deadline",
    ),
]


@pytest.mark.parametrize("label, primary, code, words", FAILURES, ids=[f[0] for f in FAILURES])
def test_each_failure_before_output_hands_the_turn_to_the_fallback(
    server, api, scripted, label, primary, code, words
):
    chat = chat_with_backup(api, scripted)
    scripted.enqueue(*primary, model="primary-model")
    scripted.enqueue(Scenario().text("From the backup.", chunks=2), model="backup-model")
    events = run_turn(server, chat["id"])
    assert "error" not in types(events), events
    route = of_type(events, "model_route")[0]["data"]
    assert route["model"] == "backup-model" and route["reason"] == code
    assert route["notice"] == f"Trying backup-model on scripted-openai_chat: {words}"
    notice = f"Answered by backup-model on scripted-openai_chat: {words}"
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "From the backup."
    assert answer["meta"]["model"] == "backup-model"
    fallback = answer["meta"]["fallback"]
    assert fallback["notice"] == notice and fallback["answered"] is True
    assert fallback["failures"][0]["code"] == code
    # Every attempt of the primary came before the backup's one request.
    models = [r.model for r in scripted.requests if r.protocol]
    assert models == ["primary-model"] * len(primary) + ["backup-model"]
    # The transcript and the exports say it in words.
    page = urllib.request.urlopen(
        urllib.request.Request(f"{server.url}/c/{chat['id']}", headers=server.headers)
    ).read()
    assert notice.encode() in page
    for fmt in ("md", "txt", "html"):
        exported = urllib.request.urlopen(
            urllib.request.Request(
                f"{server.url}/api/session/{chat['id']}/export?fmt={fmt}", headers=server.headers
            )
        ).read()
        assert notice.encode() in exported, fmt


def test_a_refused_connection_hands_the_turn_to_the_fallback(server, api, scripted):
    status, dead = api.post(
        "/api/endpoints",
        {
            "name": "nothing-listens",
            "kind": "openai_chat",
            "base_url": f"http://127.0.0.1:{free_port()}/v1",
            "api_key": "k",
            "default_model": "primary-model",
        },
    )
    assert status == 201, dead
    chat = chat_with_backup(api, scripted, endpoint_id=dead["id"])
    scripted.enqueue(Scenario().text("Still answered."), model="backup-model")
    events = run_turn(server, chat["id"])
    assert "error" not in types(events)
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "Still answered."
    assert answer["meta"]["fallback"]["notice"] == (
        "Answered by backup-model on scripted-openai_chat: primary-model could not be reached"
    )
    assert [r.model for r in scripted.requests if r.protocol] == ["backup-model"]


def test_output_that_began_never_switches(server, api, scripted):
    chat = chat_with_backup(api, scripted)
    scripted.enqueue(Scenario().text("Half an ans", chunks=2).drop(), model="primary-model")
    events = run_turn(server, chat["id"])
    assert "model_route" not in types(events)
    assert of_type(events, "error")[0]["data"]["code"] == "stream_interrupted"
    answer = api.history(chat["id"])[-1]
    assert answer["content"] == "Half an ans" and "fallback" not in answer["meta"]
    assert {r.model for r in scripted.requests if r.protocol} == {"primary-model"}


def test_the_whole_chain_failing_says_so_and_keeps_the_error(server, api, scripted):
    chat = chat_with_backup(api, scripted)
    scripted.enqueue(Scenario.http_error(401), model="primary-model")
    scripted.enqueue(Scenario.http_error(401), model="backup-model")
    events = run_turn(server, chat["id"])
    assert of_type(events, "error")[0]["data"]["code"] == "provider_auth"
    answer = api.history(chat["id"])[-1]
    assert answer["meta"]["error"]["code"] == "provider_auth"
    assert answer["meta"]["fallback"]["answered"] is False
    assert answer["meta"]["fallback"]["notice"].startswith(
        "backup-model on scripted-openai_chat failed too"
    )


def test_the_settings_default_chain_serves_chats_without_their_own(server, api, scripted):
    chat = make_chat(api, scripted, model="primary-model")
    endpoint_id = chat["endpoint"]["id"]
    status, body = api.call(
        "PUT",
        "/api/fallbacks",
        {"fallbacks": [{"endpoint_id": endpoint_id, "model": "backup-model"}]},
    )
    assert status == 200 and body["fallbacks"] == [
        {"endpoint_id": endpoint_id, "model": "backup-model"}
    ]
    try:
        scripted.enqueue(Scenario.http_error(401), model="primary-model")
        scripted.enqueue(Scenario().text("Default chain."), model="backup-model")
        events = run_turn(server, chat["id"])
        assert "error" not in types(events)
        assert api.history(chat["id"])[-1]["meta"]["fallback"]["model"] == "backup-model"
    finally:
        assert api.call("PUT", "/api/fallbacks", {"fallbacks": []})[0] == 200


def test_a_chat_in_a_project_uses_the_projects_chain(server, api, scripted):
    """Chat's own chain, else its project's, else the user's: the first non-empty one."""
    chat = make_chat(api, scripted, model="primary-model")
    endpoint_id = chat["endpoint"]["id"]
    status, project = api.post(
        "/api/projects",
        {
            "name": "Chained",
            "settings": {"fallbacks": [{"endpoint_id": endpoint_id, "model": "project-backup"}]},
        },
    )
    assert status == 201, project
    status, body = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200 and "fallbacks" not in body["settings"], body
    user_chain = {"fallbacks": [{"endpoint_id": endpoint_id, "model": "user-backup"}]}
    assert api.call("PUT", "/api/fallbacks", user_chain)[0] == 200
    try:
        scripted.enqueue(Scenario.http_error(529, retry_after=0), model="primary-model")
        scripted.enqueue(Scenario.http_error(529, retry_after=0), model="primary-model")
        scripted.enqueue(Scenario().text("From the project's backup."), model="project-backup")
        events = run_turn(server, chat["id"])
        assert "error" not in types(events), events
        notice = "Answered by project-backup on scripted-openai_chat: primary-model returned 529"
        answer = api.history(chat["id"])[-1]
        assert answer["content"] == "From the project's backup."
        assert answer["meta"]["fallback"]["notice"] == notice
        assert [r.model for r in scripted.requests if r.protocol] == [
            "primary-model",
            "primary-model",
            "project-backup",
        ], "the project's chain replaces the user's, it is not added to it"
        page = urllib.request.urlopen(
            urllib.request.Request(f"{server.url}/c/{chat['id']}", headers=server.headers)
        ).read()
        assert notice.encode() in page

        # The chat's own chain wins over the project's.
        own = {"fallbacks": [{"endpoint_id": endpoint_id, "model": "own-backup"}]}
        assert api.call("PATCH", f"/api/session/{chat['id']}", {"settings": own})[0] == 200
        scripted.enqueue(Scenario.http_error(401), model="primary-model")
        scripted.enqueue(Scenario().text("Own chain."), model="own-backup")
        assert "error" not in types(run_turn(server, chat["id"], "Again"))
        assert api.history(chat["id"])[-1]["meta"]["fallback"]["model"] == "own-backup"

        # Out of the project, with no chain of its own: the user's default answers.
        api.call("PATCH", f"/api/session/{chat['id']}", {"settings": {"fallbacks": []}})
        api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": None})
        scripted.enqueue(Scenario.http_error(401), model="primary-model")
        scripted.enqueue(Scenario().text("User chain."), model="user-backup")
        assert "error" not in types(run_turn(server, chat["id"], "Once more"))
        assert api.history(chat["id"])[-1]["meta"]["fallback"]["model"] == "user-backup"
    finally:
        assert api.call("PUT", "/api/fallbacks", {"fallbacks": []})[0] == 200


# --- bad input: a stable code, nothing changed ------------------------------------------------


def test_bad_fallbacks_are_refused_and_change_nothing(server, api, scripted):
    chat = make_chat(api, scripted, model="own-model")
    endpoint_id = chat["endpoint"]["id"]
    good = [{"endpoint_id": endpoint_id, "model": "backup-model"}]
    assert (
        api.call("PATCH", f"/api/session/{chat['id']}", {"settings": {"fallbacks": good}})[0] == 200
    )
    status, doomed = api.post(
        "/api/endpoints",
        {
            "name": "doomed",
            "kind": "openai_chat",
            "base_url": scripted.openai_base_url,
            "api_key": "k",
        },
    )
    assert api.call("DELETE", f"/api/endpoints/{doomed['id']}")[0] == 200
    cases = [
        ([{"endpoint_id": doomed["id"], "model": "m"}], "fallback_endpoint_not_found"),
        ([{"endpoint_id": 999999, "model": "m"}], "fallback_endpoint_not_found"),
        ([{"endpoint_id": endpoint_id, "model": "own-model"}], "fallback_is_own_route"),
        ([{"endpoint_id": endpoint_id, "model": f"m{n}"} for n in range(11)], "too_many_fallbacks"),
        (good + good, "duplicate_fallback"),
        ([{"endpoint_id": endpoint_id, "model": ""}], "invalid_fallbacks"),
        ([{"endpoint_id": endpoint_id, "model": "m", "kind": "x"}], "invalid_fallbacks"),
        ("not a list", "invalid_fallbacks"),
    ]
    for fallbacks, code in cases:
        status, body = api.call(
            "PATCH", f"/api/session/{chat['id']}", {"settings": {"fallbacks": fallbacks}}
        )
        assert (status, body["error"]["code"]) == (400, code), fallbacks
        if code != "fallback_is_own_route":  # the Settings chain has no route of its own
            status, body = api.call("PUT", "/api/fallbacks", {"fallbacks": fallbacks})
            assert (status, body["error"]["code"]) == (400, code), fallbacks
    assert api.get(f"/api/session/{chat['id']}")[1]["settings"]["fallbacks"] == good
    assert api.get("/api/fallbacks")[1]["fallbacks"] == []
    # Exactly ten is allowed.
    ten = [{"endpoint_id": endpoint_id, "model": f"m{n}"} for n in range(10)]
    assert (
        api.call("PATCH", f"/api/session/{chat['id']}", {"settings": {"fallbacks": ten}})[0] == 200
    )
