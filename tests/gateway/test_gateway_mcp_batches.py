"""JSON-RPC batches on /mcp, in-process on every database backend: a session negotiated
at 2025-03-26 (the one version whose transport allowed them) gets an array of answers in
order, none for notifications; later versions' sessions are refused with one JSON-RPC
error; an empty batch, elements that are not messages, `initialize` inside a batch, and
a batch past the key's rate each get their code and change nothing."""

from __future__ import annotations

from numi.extensions import db
from numi.models import Chat

BATCH_VERSION = "2025-03-26"


def _session(client, version: str, uses=("history", "mcp")) -> dict:
    made = client.post("/api/keys", json={"name": "agent", "uses": list(uses)})
    assert made.status_code == 201, made.get_json()
    headers = {"Authorization": f"Bearer {made.get_json()['secret']}"}
    opened = client.post(
        "/mcp",
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}},
        },
    )
    assert opened.get_json()["result"]["protocolVersion"] == version
    return {**headers, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"]}


def _request(message_id, method: str, params=None) -> dict:
    return {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}


def _code(answer: dict) -> str:
    return answer["error"]["data"]["code"]


def test_a_2025_03_26_session_gets_an_array_of_answers_in_order(make_app):
    app = make_app()
    client = app.test_client()
    made = client.post("/api/session", json={"title": "Porridge notes"})
    assert made.status_code == 201, made.get_json()
    session = _session(client, BATCH_VERSION)
    answer = client.post(
        "/mcp",
        headers=session,
        json=[
            _request("a", "ping"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            _request(2, "tools/list"),
            _request(3, "tools/call", {"name": "list_chats", "arguments": {}}),
            _request(4, "resources/list"),
        ],
    )
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    ping, listed, called, unknown = answer.get_json()
    assert ping == {"jsonrpc": "2.0", "id": "a", "result": {}}
    assert listed["id"] == 2 and "list_chats" in {t["name"] for t in listed["result"]["tools"]}
    assert called["id"] == 3 and not called["result"]["isError"]
    assert [c["title"] for c in called["result"]["structuredContent"]["chats"]] == [
        "Porridge notes"
    ]
    # One request's refusal is its own element; the others are answered.
    assert unknown["id"] == 4 and _code(unknown) == "unknown_method"
    # Only notifications (or responses to nothing Numi asked): taken, nothing to say.
    quiet = client.post(
        "/mcp",
        headers=session,
        json=[
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            {"jsonrpc": "2.0", "id": 9, "result": {}},
        ],
    )
    assert quiet.status_code == 202 and not quiet.get_data()


def test_later_versions_refuse_a_batch_with_one_json_rpc_error(make_app):
    client = make_app().test_client()
    for version in ("2025-06-18", "2025-11-25", "2024-11-05"):
        session = _session(client, version)
        refused = client.post("/mcp", headers=session, json=[_request(1, "ping")])
        assert refused.status_code == 400, version
        body = refused.get_json()
        assert body["id"] is None and body["error"]["code"] == -32600
        assert _code(body) == "mcp_batch_unsupported" and version in body["error"]["message"]
        # The same message alone is answered.
        alone = client.post("/mcp", headers=session, json=_request(1, "ping"))
        assert alone.get_json()["result"] == {}


def test_bad_batches_get_their_codes_and_change_nothing(make_app):
    app = make_app(NUMI_API_RATE_PER_MINUTE=12)
    client = app.test_client()
    session = _session(client, BATCH_VERSION, uses=("chat", "mcp"))
    empty = client.post("/mcp", headers=session, json=[])
    assert empty.status_code == 400
    assert empty.get_json()["id"] is None and _code(empty.get_json()) == "invalid_batch"
    # Elements that are not messages each get an error with id null, in their place.
    mixed = client.post(
        "/mcp",
        headers=session,
        json=[1, "ping", _request(5, "ping"), {"jsonrpc": "1.0", "id": 6, "method": "ping"}, []],
    )
    assert mixed.status_code == 200
    answers = mixed.get_json()
    assert [a["id"] for a in answers] == [None, None, 5, 6, None]
    assert [a.get("result") for a in answers] == [None, None, {}, None, None]
    assert {_code(a) for i, a in enumerate(answers) if i != 2} == {"invalid_body"}
    assert all(a["error"]["code"] == -32600 for i, a in enumerate(answers) if i != 2)
    # initialize may not ride in a batch.
    init = _request(8, "initialize", {"protocolVersion": BATCH_VERSION})
    [refused] = client.post("/mcp", headers=session, json=[init]).get_json()
    assert refused["id"] == 8 and _code(refused) == "mcp_initialize_in_batch"
    # A batch needs its session, as every message after initialize does.
    no_session = {"Authorization": session["Authorization"]}
    missing = client.post("/mcp", headers=no_session, json=[_request(1, "ping")])
    assert missing.status_code == 400 and _code(missing.get_json()) == "mcp_session_missing"
    # Each request of a batch counts against the key's rate (12 a minute; 6 counted so far):
    # a batch of more than is left is refused whole, before any of it runs.
    ask = _request(9, "tools/call", {"name": "ask", "arguments": {"message": "hi"}})
    over = client.post("/mcp", headers=session, json=[ask] + [_request(10, "ping")] * 6)
    assert over.status_code == 429 and _code(over.get_json()) == "api_rate_limited"
    assert int(over.headers["Retry-After"]) >= 1
    with app.app_context():
        assert db.session.query(Chat).count() == 0
