"""The real `numi serve` process: HTTP, WebSocket handshakes, restarts and the CLI."""

from __future__ import annotations

import json
import socket
import urllib.request
from base64 import b64encode
from os import urandom
from urllib.parse import urlsplit

import pytest
from numi.testing.websocket_client import WebSocketClient
from server_wait import WAIT_SECONDS


def _http(server, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        server.url + path, data=data, method=method, headers={**server.headers, **(headers or {})}
    )
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _handshake(server, path, headers) -> int:
    """Send a WebSocket upgrade request and return the HTTP status of the answer."""
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: 127.0.0.1:{server.port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {b64encode(urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    lines += [f"{k}: {v}" for k, v in {**server.headers, **headers}.items()]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    return int(status_line.split()[1])


def _ws(server, path, **headers):
    return WebSocketClient.connect(
        f"ws://127.0.0.1:{server.port}{path}",
        headers={"Origin": server.url, **server.headers, **headers},
    )


def test_serves_pages_with_a_persisted_secret(live_server):
    request = urllib.request.Request(live_server.url + "/", headers=live_server.headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert "Numi" in response.read().decode()
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    secret = live_server.data_dir / "secret_key"
    assert secret.exists() and oct(secret.stat().st_mode & 0o777) == "0o600"
    assert (live_server.data_dir / "numi.db").exists()


def test_websocket_checks_origin_and_owner(live_server):
    status, chat = _http(live_server, "POST", "/api/session", {"title": "socket chat"})
    assert status == 201
    path = f"/ws/{chat['id']}?format=json"
    assert _handshake(live_server, path, {"Origin": live_server.url}) == 101
    assert _handshake(live_server, path, {"Origin": "http://evil.example"}) == 403
    assert _handshake(live_server, path, {"Origin": "null"}) == 403
    assert (
        _handshake(
            live_server, "/ws/00000000-0000-0000-0000-000000000000", {"Origin": live_server.url}
        )
        == 404
    )
    assert _handshake(live_server, path, {"Origin": live_server.url, "Host": "evil.example"}) in (
        400,
    )


def test_websocket_refuses_bad_messages_and_stays_open(live_server):
    _, chat = _http(live_server, "POST", "/api/session", {"title": "bad messages"})
    ws = _ws(live_server, f"/ws/{chat['id']}?format=json")
    try:
        expected = []
        for raw, code in (
            ("{not json", "invalid_json"),
            ("[1, 2]", "invalid_json"),
            (json.dumps({"type": "explode"}), "unknown_type"),
            (
                json.dumps({"type": "send", "message": "x" * 200_001, "request_id": "r1"}),
                "too_long",
            ),
        ):
            ws.send(raw)
            expected.append(code)
        seen = []
        while len(seen) < len(expected):
            event = json.loads(ws.receive(timeout=10))
            if event["type"] == "error":
                seen.append(event["data"]["code"])
        assert seen == expected
    finally:
        ws.close()
    # Nothing was saved by the refused messages.
    status, history = _http(live_server, "GET", f"/api/history/{chat['id']}")
    assert status == 200 and history["messages"] == []


def test_data_survives_restart_and_crash(live_server):
    status, chat = _http(live_server, "POST", "/api/session", {"title": "durable"})
    assert status == 201
    live_server.restart()
    assert "durable" in [
        s["title"] for s in _http(live_server, "GET", "/api/sessions")[1]["sessions"]
    ]
    live_server.kill()
    live_server.start()
    assert "durable" in [
        s["title"] for s in _http(live_server, "GET", "/api/sessions")[1]["sessions"]
    ]


def test_cli_endpoint_commands_share_the_data_dir(live_server):
    env_key = "NUMI_TEST_CLI_KEY"
    live_server.env[env_key] = "sk-cli-secret-123"
    try:
        out = live_server.cli(
            "endpoint",
            "add",
            "CLI endpoint",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--api-key-env",
            env_key,
            "--default-model",
            "tiny",
        )
    finally:
        live_server.env.pop(env_key)
    assert "Added endpoint CLI endpoint" in out.stdout
    assert "CLI endpoint" in live_server.cli("endpoint", "list").stdout
    status, body = _http(live_server, "GET", "/api/endpoints")
    assert status == 200 and [e["name"] for e in body["endpoints"]] == ["CLI endpoint"]
    assert "sk-cli-secret" not in json.dumps(body)
    failed = live_server.cli("endpoint", "models", "CLI endpoint", check=False)
    assert (
        failed.returncode != 0
        and "Traceback" not in failed.stderr
        and "provider_unavailable" in failed.stderr
    )
    assert "Removed" in live_server.cli("endpoint", "remove", "CLI endpoint").stdout
    assert _http(live_server, "GET", "/api/endpoints")[1]["endpoints"] == []
    for command in (
        ["--help"],
        ["serve", "--help"],
        ["endpoint", "add", "--help"],
        ["user", "create", "--help"],
        ["token", "create", "--help"],
        ["db", "upgrade", "--help"],
    ):
        assert live_server.cli(*command).stdout.startswith("Usage:")


@pytest.fixture(scope="module")
def multi_server(live_server_factory):
    server = live_server_factory(NUMI_AUTH="multi")
    tokens = {}
    for name in ("alice", "bob"):
        server.cli("user", "create", name, "--password-stdin", input="long enough password\n")
        tokens[name] = server.cli("token", "create", "--user", name).stdout.strip()
    assert "alice" in server.cli("user", "list").stdout
    yield server, tokens
    server.stop()


def test_multi_user_server_with_cli_users_and_tokens(multi_server):
    server, tokens = multi_server
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    bob = {"Authorization": f"Bearer {tokens['bob']}"}
    assert _http(server, "GET", "/api/sessions")[0] == 401
    status, chat = _http(server, "POST", "/api/session", {"title": "alice only"}, alice)
    assert status == 201
    assert _http(server, "GET", f"/api/history/{chat['id']}", headers=bob)[0] == 404
    assert _http(server, "GET", "/api/sessions", headers=bob)[1]["sessions"] == []
    path = f"/ws/{chat['id']}?format=json"
    assert _handshake(server, path, {"Origin": server.url, **alice}) == 101
    assert _handshake(server, path, {"Origin": server.url, **bob}) == 404
    assert _handshake(server, path, {"Origin": server.url}) == 401
    # The login page works over real HTTP.
    with urllib.request.urlopen(server.url + "/login", timeout=10) as response:
        assert response.status == 200 and 'name="password"' in response.read().decode()
    assert urlsplit(server.url).hostname == "127.0.0.1"


def test_running_chats_names_only_the_askers_own_running_chats(multi_server, scripted, until):
    """The sidebar's poll (/chats/running) while both users' turns run: each sees only
    their own chat, though both ids are asked for."""
    from numi.testing import Scenario

    server, tokens = multi_server
    auth = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    server.cli(
        "endpoint",
        "add",
        "Running",
        "--base-url",
        scripted.openai_base_url,
        "--default-model",
        "fake-model",
    )
    endpoint = next(
        e
        for e in _http(server, "GET", "/api/endpoints", headers=auth["alice"])[1]["endpoints"]
        if e["name"] == "Running"
    )
    chat_ids, sockets = {}, []
    try:
        for name in ("alice", "bob"):
            scripted.enqueue(Scenario().text("held").stall())
            status, chat = _http(
                server,
                "POST",
                "/api/session",
                {"endpoint_id": endpoint["id"], "model": "fake-model"},
                auth[name],
            )
            assert status == 201, chat
            chat_ids[name] = chat["id"]
            sock = WebSocketClient.connect(
                f"ws://127.0.0.1:{server.port}/ws/{chat['id']}?format=json",
                headers={"Origin": server.url, **auth[name]},
            )
            sockets.append(sock)
            sock.send(json.dumps({"type": "send", "message": "Keep going"}))
            until(
                lambda: _http(
                    server, "GET", f"/api/chat/stream_status/{chat['id']}", headers=auth[name]
                )[1].get("running"),
                what=f"{name}'s turn to run",
            )
        both = f"{chat_ids['alice']},{chat_ids['bob']}"
        for name in ("alice", "bob"):
            status, body = _http(server, "GET", f"/chats/running?ids={both}", headers=auth[name])
            assert status == 200 and body == {"running": [chat_ids[name]]}, name
    finally:
        scripted.release()
        # Both turns end before the next test opens its feeds (a late "stopped" of one of
        # these chats reached the next test's feed at load average 25).
        for name, chat_id in chat_ids.items():
            until(
                lambda: (
                    not _http(
                        server, "GET", f"/api/chat/stream_status/{chat_id}", headers=auth[name]
                    )[1].get("running")
                ),
                what=f"{name}'s turn to end",
            )
        for sock in sockets:
            sock.close()


def test_the_sidebar_feed_tells_each_user_of_their_own_chats_only(multi_server, scripted):
    """/ws/sidebar/feed (the sidebar's feed, in place of its poll): a user's open feed hears
    of their chat that starts and stops answering, with its title; another user's feed
    hears nothing of it (its first message is of its own chat). No user, no feed."""
    from numi.testing import Scenario

    server, tokens = multi_server
    auth = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    assert _handshake(server, "/ws/sidebar/feed", {"Origin": server.url}) == 401
    server.cli(
        "endpoint", "add", "Feed", "--base-url", scripted.openai_base_url,
        "--default-model", "fake-model",
    )  # fmt: skip
    feeds, sockets = {}, []
    try:
        for name in ("alice", "bob"):
            feeds[name] = WebSocketClient.connect(
                f"ws://127.0.0.1:{server.port}/ws/sidebar/feed",
                headers={"Origin": server.url, **auth[name]},
            )
        for name in ("alice", "bob"):
            endpoint = next(
                e
                for e in _http(server, "GET", "/api/endpoints", headers=auth[name])[1]["endpoints"]
                if e["name"] == "Feed"
            )
            status, chat = _http(
                server,
                "POST",
                "/api/session",
                {"endpoint_id": endpoint["id"], "model": "fake-model", "title": f"{name}'s"},
                auth[name],
            )
            assert status == 201, chat
            scripted.enqueue(Scenario().text("done"))
            sock = WebSocketClient.connect(
                f"ws://127.0.0.1:{server.port}/ws/{chat['id']}?format=json",
                headers={"Origin": server.url, **auth[name]},
            )
            sockets.append(sock)
            sock.send(json.dumps({"type": "send", "message": "Hello"}))
            told = [json.loads(feeds[name].receive(timeout=WAIT_SECONDS)) for _ in range(2)]
            assert told[0] == {"chat_id": chat["id"], "running": True, "title": f"{name}'s"}
            assert told[1]["chat_id"] == chat["id"] and told[1]["running"] is False
    finally:
        for sock in [*sockets, *feeds.values()]:
            sock.close()
