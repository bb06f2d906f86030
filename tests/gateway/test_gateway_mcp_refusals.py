"""/mcp in-process: the handshake's version negotiation and session id, and every refusal
(no key, a key without the use, no or another key's session, a malformed message, an
unknown method or tool, a browser's foreign Origin) with its HTTP status and stable
code; key uses on /v1; one user's key never reaching another user's chats."""

from __future__ import annotations

from fixtures.users import sign_in
from numi.extensions import db
from numi.models import Chat

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}},
}


def _key(client, uses) -> dict:
    made = client.post("/api/keys", json={"name": "agent", "uses": uses})
    assert made.status_code == 201, made.get_json()
    return {"Authorization": f"Bearer {made.get_json()['secret']}"}


def _session(client, headers) -> dict:
    opened = client.post("/mcp", headers=headers, json=INIT)
    assert opened.status_code == 200, opened.get_json()
    return {**headers, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"]}


def _rpc(client, headers, method, params=None, status=200):
    answer = client.post(
        "/mcp",
        headers=headers,
        json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
    )
    assert answer.status_code == status, answer.get_json()
    return answer.get_json()


def test_handshake_negotiates_the_version_and_every_refusal_has_its_code(make_app):
    app = make_app()
    client = app.test_client()
    full = _key(client, ["history", "documents", "mcp"])
    opened = client.post("/mcp", headers=full, json=INIT).get_json()
    assert opened["result"]["protocolVersion"] == "2025-06-18"
    newer = {**INIT, "params": {**INIT["params"], "protocolVersion": "2099-01-01"}}
    assert (
        client.post("/mcp", headers=full, json=newer).get_json()["result"]["protocolVersion"]
        == "2025-11-25"
    )
    session = _session(client, full)
    assert _rpc(client, session, "ping") == {"jsonrpc": "2.0", "id": 7, "result": {}}
    tools = _rpc(client, session, "tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == [
        "search_chats",
        "list_chats",
        "read_chat",
        "search_documents",
    ]
    # A notification is taken without an answer.
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post("/mcp", headers=session, json=note).status_code == 202

    def code(answer):
        return answer["error"]["data"]["code"]

    # (The test client sends the access token by default: an empty header sends none.)
    assert code(_rpc(client, {"Authorization": ""}, "ping", status=401)) == "api_key_missing"
    wrong = {"Authorization": "Bearer numi-sk-nope"}
    assert code(_rpc(client, wrong, "ping", status=401)) == "api_key_invalid"
    v1_only = _key(client, ["chat"])
    assert code(_rpc(client, v1_only, "ping", status=403)) == "api_key_scope"
    assert code(_rpc(client, full, "ping", status=400)) == "mcp_session_missing"
    other = _session(client, _key(client, ["mcp"]))
    foreign = {**full, "Mcp-Session-Id": other["Mcp-Session-Id"]}
    assert code(_rpc(client, foreign, "ping", status=404)) == "mcp_session_unknown"
    forged = {**full, "Mcp-Session-Id": "abc.def"}
    assert code(_rpc(client, forged, "ping", status=404)) == "mcp_session_unknown"
    old = {**session, "MCP-Protocol-Version": "1999-01-01"}
    assert code(_rpc(client, old, "ping", status=400)) == "mcp_version_unsupported"
    assert code(_rpc(client, session, "resources/list")) == "unknown_method"
    assert code(_rpc(client, session, "tools/call", {"name": "rm"})) == "unknown_tool"
    ask = _rpc(client, session, "tools/call", {"name": "ask", "arguments": {"message": "hi"}}, 403)
    assert code(ask) == "api_key_scope"
    bad_args = _rpc(client, session, "tools/call", {"name": "read_chat", "arguments": {}})
    assert bad_args["result"]["isError"]
    assert bad_args["result"]["structuredContent"]["error"]["code"] == "invalid_arguments"
    broken = client.post("/mcp", headers=session, data="{", content_type="application/json")
    assert broken.status_code == 400 and broken.get_json()["error"]["code"] == -32700
    deep = client.post(
        "/mcp", headers=session, data="[" * 1000 + "]" * 1000, content_type="application/json"
    )
    assert deep.status_code == 400 and deep.get_json()["error"]["data"]["code"] == "too_deep"
    assert client.get("/mcp", headers=session).status_code == 405
    cross = {**session, "Origin": "https://evil.example"}
    assert code(_rpc(client, cross, "ping", status=403)) == "bad_origin"
    # A question no model can answer (no endpoint here) is refused and leaves no chat.
    asker = _session(client, _key(client, ["chat", "mcp"]))
    asked = _rpc(client, asker, "tools/call", {"name": "ask", "arguments": {"message": "hi"}})
    assert asked["result"]["structuredContent"]["error"]["code"] == "no_model"
    with app.app_context():
        assert db.session.query(Chat).count() == 0
    # ask continues only a chat this key started, never one of the page's.
    page_chat = client.post("/api/session", json={"title": "From the page"}).get_json()
    foreign = _rpc(
        client,
        asker,
        "tools/call",
        {"name": "ask", "arguments": {"message": "hi", "chat_id": page_chat["id"]}},
    )
    assert foreign["result"]["structuredContent"]["error"]["code"] == "ask_foreign_chat"
    # A key without `chat` does not open /v1 either.
    refused = client.get("/v1/models", headers=full)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "api_key_scope"
    unknown_use = client.post("/api/keys", json={"name": "x", "uses": ["root"]})
    assert unknown_use.get_json()["error"]["code"] == "invalid_key_scope"


def test_one_users_key_never_reads_another_users_chats(multi_app, users):
    a, b = multi_app.test_client(), multi_app.test_client()
    sign_in(a, users["a"])
    sign_in(b, users["b"])
    with multi_app.app_context():
        chat = Chat(user_id=users["a"].id, title="Alice's secret plans")
        db.session.add(chat)
        db.session.commit()
        chat_id = chat.id
    bobs = _session(b, _key(b, ["history", "mcp"]))
    read = _rpc(b, bobs, "tools/call", {"name": "read_chat", "arguments": {"chat_id": chat_id}})
    assert read["result"]["structuredContent"]["error"]["code"] == "not_found"
    found = _rpc(b, bobs, "tools/call", {"name": "search_chats", "arguments": {"query": "secret"}})
    assert found["result"]["structuredContent"] == {"chats": [], "messages": []}
    listed = _rpc(b, bobs, "tools/call", {"name": "list_chats", "arguments": {}})
    assert listed["result"]["structuredContent"]["chats"] == []
