"""Input limits (issue 13 item 5, issue 14 "bad input that crashes"): JSON nested too deep,
over-long query values, malformed event ids and poisoned import files get a clear 400
with a stable code, never a 500, and change nothing."""

from __future__ import annotations

import re

import pytest
from import_support import imported_chat, run_import, wait_for_job

DEEP = "[" * 1000 + "]" * 1000
VERY_DEEP = "[" * 100_000 + "]" * 100_000
BODY_METHODS = {"POST", "PATCH", "PUT", "DELETE"}


def _chat_with_messages(app, client) -> tuple[str, int]:
    from numi.extensions import db
    from numi.models import Chat, Message

    chat_id = client.post("/api/session", json={"title": "limits"}).get_json()["id"]
    with app.app_context():
        chat = db.session.get(Chat, chat_id)
        question = Message(chat_id=chat.id, role="user", content="hi", request_id="r1")
        db.session.add(question)
        db.session.flush()
        db.session.add(Message(chat_id=chat.id, role="assistant", content="hello"))
        db.session.commit()
        return chat.id, question.id


def _routes_with_bodies(app):
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or set()) & BODY_METHODS):
            yield method, rule


def _fill(rule, values: dict[str, object]) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", lambda m: str(values[m.group(1)]), rule.rule)


# Routes that read a JSON body: each must refuse the deep one as too_deep.
JSON_ROUTES = {
    "/api/session",
    "/api/session/<chat_id>",
    "/api/endpoints",
    "/api/endpoints/<int:endpoint_id>",
    "/api/chat_stream",
    "/api/import",
    "/api/session/<chat_id>/messages/<int:message_id>/edit",
    "/api/session/<chat_id>/regenerate",
    "/api/mcp_servers",
    "/c/<chat_id>/auto_compact",
    "/chats",
    "/c/<chat_id>/rename",
    "/c/<chat_id>/settings",
    "/settings/endpoints",
    "/api/prompts",
    # This round's: documents, scheduled tasks, API keys, budgets, share links.
    "/api/documents/settings",
    "/api/tasks",
    "/api/tasks/<int:task_id>",
    "/api/keys",
    "/api/budgets",
    "/api/aliases",
    "/api/session/<chat_id>/share",
}


def test_a_1000_deep_json_body_is_refused_on_every_route(sqlite_app, sqlite_client):
    client = sqlite_client
    seen_json = set()
    for method, rule in _routes_with_bodies(sqlite_app):
        endpoint = client.post(
            "/api/endpoints",
            json={
                "name": f"E {method} {rule.rule}"[:90],
                "kind": "openai_chat",
                "base_url": "http://127.0.0.1:9/v1",
            },
        ).get_json()
        chat_id, message_id = _chat_with_messages(
            sqlite_app, sqlite_client
        )  # a fresh chat: some routes delete
        url = _fill(
            rule,
            {
                "chat_id": chat_id,
                "message_id": message_id,
                "endpoint_id": endpoint["id"],
                "server_id": 1,
                "item_id": 1,
                "prompt_id": 1,
                "project_id": 1,
                "memory_id": 1,
                "attachment_id": 1,
                "job_id": 1,
                "key_id": 1,
                "task_id": 1,
                "share_id": 1,
                "budget_id": 1,
                "alias_id": 1,
                "token": "no-such-share",
                "rest": "no-such-route",
            },
        )
        if rule.rule == "/logout":
            continue  # ends the session the other requests need
        response = client.open(url, method=method, data=DEEP, content_type="application/json")
        where = (
            f"{method} {rule.rule}: {response.status_code} {response.get_data(as_text=True)[:200]}"
        )
        assert response.status_code < 500, where
        if rule.rule in ("/api/import", "/import"):
            # An import is refused by its background job, with the same code.
            job = wait_for_job(client, int(response.headers["Location"].rsplit("/", 1)[1]))
            assert job["error"]["code"] == "too_deep", where
            seen_json.add(rule.rule)
            continue
        if rule.rule in JSON_ROUTES and method != "DELETE":
            assert response.status_code == 400, where
            seen_json.add(rule.rule)
            if url.startswith("/api/"):
                assert response.get_json()["error"]["code"] == "too_deep", where
            else:
                assert "<code>too_deep</code>" in response.get_data(as_text=True), where
    assert seen_json == JSON_ROUTES | {"/import"}


def test_a_100000_deep_array_on_chat_stream_is_a_400(sqlite_app, sqlite_client):
    chat_id, _ = _chat_with_messages(sqlite_app, sqlite_client)
    response = sqlite_client.post(
        "/api/chat_stream", data=VERY_DEEP, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "too_deep"
    deep_object = '{"session": "%s", "message": "hi", "x": %s}' % (chat_id, VERY_DEEP)
    response = sqlite_client.post(
        "/api/chat_stream", data=deep_object, content_type="application/json"
    )
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "too_deep"
    # a deep value inside a string is text, not nesting
    shallow = sqlite_client.post("/api/session", json={"title": "[" * 150})
    assert shallow.status_code == 201, shallow.get_data(as_text=True)


@pytest.mark.parametrize("value", ["²", "5" * 5000, "-1", "1e3", "0x10"])
def test_resume_with_a_malformed_last_event_id_is_a_400(sqlite_app, sqlite_client, value):
    chat_id, _ = _chat_with_messages(sqlite_app, sqlite_client)
    for kwargs in (
        {"query_string": {"last_event_id": value}},
        {"headers": {"Last-Event-ID": value}},
    ):
        response = sqlite_client.get(f"/api/chat/resume/{chat_id}", **kwargs)
        assert response.status_code == 400, (kwargs, response.get_data(as_text=True)[:200])
        assert response.get_json()["error"]["code"] in ("invalid_event_id", "too_long")


def test_an_over_long_query_value_is_a_400_on_any_route(sqlite_client):
    for url in ("/api/sessions", "/", "/api/search"):
        response = sqlite_client.get(url, query_string={"q": "x" * 5000})
        assert response.status_code == 400, url
        assert "too_long" in response.get_data(as_text=True)


def test_int_query_arguments_refuse_unicode_digits_and_huge_numbers(sqlite_app, sqlite_client):
    chat_id, _ = _chat_with_messages(sqlite_app, sqlite_client)
    for value in ("²", "9" * 4000):
        response = sqlite_client.get(f"/api/history/{chat_id}", query_string={"before": value})
        assert response.status_code == 400
        assert response.get_json()["error"]["code"] == "invalid_input"


# --- import --------------------------------------------------------------------------------


def _doc(**chat_changes) -> dict:
    return {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Poisoned", "model": None, "settings": {}, **chat_changes},
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "hello",
                "meta": {
                    "model": "m",
                    "metrics": {"tokens_per_s": "fast", "ttft_ms": 12.5},
                    "usage": {"input_tokens": "many"},
                    "surprise": {"nested": [1]},
                },
            },
        ],
    }


def test_a_poisoned_import_comes_without_tools_approval_or_workspace(
    sqlite_app, sqlite_client, tmp_path
):
    from numi.extensions import db
    from numi.models import Chat, Message

    settings = {
        "tools": ["bash", "write_file"],
        "auto_approve": True,
        "workspace": str(tmp_path),
        "system_prompt": "kept",
    }
    chat_id = imported_chat(sqlite_client, _doc(settings=settings))["id"]
    with sqlite_app.app_context():
        chat = db.session.get(Chat, chat_id)
        assert chat.settings.get("tools") in (None, [])
        assert not chat.settings.get("auto_approve")
        assert not chat.settings.get("workspace")
        assert chat.settings["system_prompt"] == "kept"
        answer = db.session.execute(
            db.select(Message).where(Message.chat_id == chat_id, Message.role == "assistant")
        ).scalar_one()
        assert answer.meta["metrics"] == {"ttft_ms": 12.5}
        assert "surprise" not in answer.meta and answer.meta["usage"] == {}
    page = sqlite_client.get(f"/c/{chat_id}")
    assert page.status_code == 200
    assert "first token 12 ms" in page.get_data(
        as_text=True
    ) or "first token 13 ms" in page.get_data(as_text=True)


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda d: d["messages"][1]["meta"].update(ok="yes"), "meta.ok"),
        (lambda d: d["messages"][1]["meta"].update(error=[1]), "meta.error"),
        (lambda d: d["messages"][1].update(citation_sources=["x"]), "citation_sources[0]"),
        (lambda d: d["messages"][1].update(citation_sources=[{"url": 5}]), "citation_sources[0]"),
        (lambda d: d["messages"][1].update(reasoning_details=[3]), "reasoning_details[0]"),
        (
            lambda d: d["messages"][0].update(content_parts=[{"type": "text", "text": {"a": 1}}]),
            "content_parts[0].text",
        ),
        (
            lambda d: d["messages"][1].update(tool_calls=[{"id": "c", "function": {"name": 1}}]),
            "tool_calls[0]",
        ),
    ],
)
def test_import_refuses_a_field_of_the_wrong_type_and_names_it(sqlite_client, change, where):
    doc = _doc()
    change(doc)
    job = run_import(sqlite_client, json=doc)
    assert job["state"] == "failed", job
    error = job["error"]
    assert error["code"] == "invalid_import" and where in error["message"]
    assert sqlite_client.get("/api/sessions").get_json()["sessions"] == []


def test_a_deep_import_file_is_refused(sqlite_client):
    from io import BytesIO

    body = (
        '{"format": "numi.chat", "version": 1, "chat": {"title": "x"}, "messages": [], "x": %s}'
        % VERY_DEEP
    ).encode()
    for job in (
        run_import(sqlite_client, data=body, content_type="application/json"),
        run_import(
            sqlite_client,
            data={"file": (BytesIO(body), "chat.json")},
            content_type="multipart/form-data",
        ),
    ):
        assert job["state"] == "failed" and job["error"]["code"] == "too_deep", job


# --- the WebSocket -------------------------------------------------------------------------


def test_bad_websocket_messages_get_an_error_event_and_keep_the_socket(server, api, sockets):
    status, chat = api.post("/api/session", {"title": "ws limits"})
    assert status == 201
    sock = sockets(chat["id"])
    cases = [
        (DEEP, "too_deep"),
        (VERY_DEEP, "too_deep"),
        ('{"type": "send", "message": "hi", "x": %s}' % VERY_DEEP, "too_deep"),
        ('{"type": "resume", "last_event_id": "²"}', "invalid_event_id"),
        ('{"type": "resume", "last_event_id": "%s"}' % ("7" * 5000), "invalid_event_id"),
        ('{"type": "resume", "last_event_id": %s}' % ("7" * 5000), "invalid_json"),
        ('{"type": "resume", "last_message_id": -3}', "invalid_event_id"),
        ('{"type": "resume", "last_event_id": true}', "invalid_event_id"),
    ]
    for raw, code in cases:
        sock.ws.send(raw)
        event = sock.receive()
        assert event["type"] == "error", raw[:80]
        assert event["data"]["code"] == code, (raw[:80], event)
    # still the same socket, still answering
    sock.send(type="nonsense")
    assert sock.receive()["data"]["code"] == "unknown_type"
    status, history = api.get(f"/api/history/{chat['id']}")
    assert status == 200 and history["messages"] == []


# Every field of a Numi export, and what a wrong type there must not break.
RICH_EXPORT = {
    "format": "numi.chat",
    "version": 1,
    "chat": {"title": "T", "settings": {"temperature": 0.5}, "endpoint": {"id": 1, "name": "x"}},
    "messages": [
        {
            "role": "user",
            "content": "hi",
            "content_parts": [
                {"type": "text", "text": "a"},
                {
                    "type": "attachment",
                    "id": 3,
                    "attachment_info": {"filename": "f", "sha256": "ab"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "r",
            "reasoning_details": [{"type": "x"}],
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
            "meta": {
                "model": "m",
                "metrics": {"tokens_per_s": 1.0, "ttft_ms": 3},
                "usage": {"input_tokens": 1},
                "error": {"code": "x", "message": "y"},
                "ok": True,
                "tool": "t",
            },
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "ok",
            "meta": {"tool": "f", "ok": False, "error_code": "e"},
        },
        {
            "role": "assistant",
            "content": "done",
            "citation_sources": [{"n": 1, "url": "https://example.org", "title": "t"}],
            "meta": {"model": "m", "metrics": {"duration_ms": 5}},
        },
    ],
}
WRONG_VALUES = [None, 7, "text", [], {}, True, 1.5, [1], {"a": 1}]


def _field_paths(value, path=()):
    if path:
        yield path
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        yield from _field_paths(child, path + (key,))


@pytest.mark.slow(reason="hundreds of imports one after another: 23 s alone, minutes at load 20")
# pytest-timeout's 300 s is for hangs; a loaded machine took this test past it.
@pytest.mark.timeout(1200)
def test_any_field_of_the_wrong_type_is_refused_or_imports_a_chat_that_opens(sqlite_client):
    import copy

    imported = 0
    for path in _field_paths(RICH_EXPORT):
        for wrong in WRONG_VALUES:
            document = copy.deepcopy(RICH_EXPORT)
            target = document
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = wrong
            where = f"{'.'.join(map(str, path))} = {wrong!r}"
            job = run_import(sqlite_client, json=document)
            assert job["state"] in ("done", "failed"), where
            if job["state"] == "failed":
                assert job["error"]["code"] in ("invalid_import", "invalid_input"), where
                continue
            imported += 1
            chat_id = job["result"]["chat"]["id"]
            for url in (
                f"/c/{chat_id}",
                f"/api/session/{chat_id}/export?fmt=html",
                f"/api/history/{chat_id}",
                f"/api/session/{chat_id}/context",
            ):
                assert sqlite_client.get(url).status_code == 200, (where, url)
    assert imported > 50  # not vacuous: most wrong values are dropped or tolerated, not refused
