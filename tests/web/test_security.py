"""Host, Origin and login checks: DNS rebinding, CSRF, cross-site WebSocket hijacking."""

from __future__ import annotations

import pytest

from numi.extensions import db
from numi.models import Chat
from turn_support import Api

WS_HEADERS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


def _chat_rows(app):
    with app.app_context():
        db.session.expire_all()
        return [
            (c.id, c.title, c.deleted_at)
            for c in db.session.execute(db.select(Chat).order_by(Chat.id)).scalars()
        ]


def _writes(chat_id: str):
    """Every kind of state-changing request, with a valid body."""
    return [
        ("POST", "/api/session", {"json": {"title": "evil"}}),
        ("PATCH", f"/api/session/{chat_id}", {"json": {"title": "evil"}}),
        ("DELETE", f"/api/session/{chat_id}", {}),
        (
            "POST",
            "/api/endpoints",
            {"json": {"name": "evil", "kind": "openai_chat", "base_url": "http://127.0.0.1:9"}},
        ),
        ("POST", "/chats", {"data": {"title": "evil"}}),
        ("POST", f"/c/{chat_id}/rename", {"data": {"title": "evil"}}),
        ("POST", f"/c/{chat_id}/delete", {}),
        ("POST", f"/c/{chat_id}/settings", {"data": {"system_prompt": "evil"}}),
        (
            "POST",
            "/settings/endpoints",
            {"data": {"name": "evil", "kind": "openai_chat", "base_url": "http://127.0.0.1:9"}},
        ),
    ]


@pytest.mark.parametrize(
    "host", ["evil.example", "attacker.localhost.evil", "127.0.0.2", "localhost.evil:8765"]
)
def test_foreign_host_is_refused(sqlite_client, host):
    for url in ("/", "/api/sessions", "/healthz", "/settings"):
        response = sqlite_client.get(url, headers={"Host": host})
        assert response.status_code == 400, url
    response = sqlite_client.get("/api/sessions", headers={"Host": host})
    assert response.get_json()["error"]["code"] == "bad_host"


def test_local_hosts_and_configured_hosts_are_accepted(make_app):
    app = make_app(NUMI_ALLOWED_HOSTS=("numi.lan",))
    client = app.test_client()
    for host in (
        "localhost",
        "localhost:8765",
        "127.0.0.1:8765",
        "[::1]:8765",
        "numi.lan",
        "NUMI.LAN:80",
    ):
        assert client.get("/api/sessions", headers={"Host": host}).status_code == 200, host
    assert client.get("/api/sessions", headers={"Host": "other.lan"}).status_code == 400


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        # Another local site on another port (browsers send the port in Host and Origin).
        {"Origin": "http://localhost:9999", "Host": "localhost:8765"},
        {"Sec-Fetch-Site": "cross-site"},
    ],
    # Only host:port is compared, not the scheme: behind a TLS proxy the browser's Origin is
    # https while the app sees http, and only our own host can serve pages for our host name.
    ids=["foreign", "null", "other-port", "sec-fetch-site"],
)
def test_cross_site_writes_are_refused_and_change_nothing(app, client, headers):
    chat_id = client.post("/api/session", json={"title": "mine"}).get_json()["id"]
    before = _chat_rows(app)
    for method, url, kwargs in _writes(chat_id):
        response = client.open(url, method=method, headers=headers, **kwargs)
        assert response.status_code == 403, f"{method} {url}"
        if url.startswith("/api/"):
            assert response.get_json()["error"]["code"] == "bad_origin"
    assert _chat_rows(app) == before
    assert client.get("/api/endpoints").get_json()["endpoints"] == []


def test_same_origin_writes_are_accepted(sqlite_client):
    response = sqlite_client.post(
        "/api/session",
        json={"title": "ok"},
        headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
    )
    assert response.status_code == 201
    response = sqlite_client.post(
        "/api/session",
        json={"title": "ok"},
        headers={"Origin": "http://127.0.0.1:8765", "Host": "127.0.0.1:8765"},
    )
    assert response.status_code == 201


def test_websocket_upgrade_with_a_foreign_origin_is_refused(sqlite_client):
    chat_id = sqlite_client.post("/api/session", json={}).get_json()["id"]
    for origin in ("http://evil.example", "null"):
        response = sqlite_client.get(f"/ws/{chat_id}", headers={**WS_HEADERS, "Origin": origin})
        assert response.status_code == 403
        assert response.headers.get("Upgrade") is None


@pytest.mark.parametrize(
    "host, origin, same",
    [
        # A Host without a port is the default port of the Origin's scheme (issue 28 item 15:
        # any port was accepted, so a page of another local service passed as our own).
        ("localhost", "http://localhost:9999", False),
        ("localhost", "http://localhost:8765", False),
        ("localhost", "https://localhost:8443", False),
        ("localhost", "http://localhost", True),
        ("localhost", "http://localhost:80", True),
        # Behind a TLS proxy: the browser's https Origin, the app's port-less Host.
        ("numi.lan", "https://numi.lan", True),
        ("numi.lan", "https://numi.lan:443", True),
        ("numi.lan:443", "https://numi.lan", True),
        ("localhost:8765", "http://localhost:8765", True),
        ("localhost:80", "http://localhost", True),
        ("localhost:8765", "http://localhost", False),
        ("localhost:8765", "http://localhost:9999", False),
        ("localhost", "ftp://localhost", False),
        ("localhost", "http://localhost:99999", False),
        ("localhost:99999", "http://localhost", False),
    ],
)
def test_a_host_without_a_port_is_the_default_port(host, origin, same):
    from numi.web.security import same_origin

    assert same_origin(origin, host) is same


@pytest.mark.parametrize(
    "host, scheme, origin, same",
    [
        # Issue 34: the scheme was ignored, so a plain-http page of the same host (one a
        # network attacker can write into) passed as the https site's own.
        ("numi.lan", "https", "http://numi.lan", False),
        ("numi.lan:443", "https", "http://numi.lan:443", False),
        ("numi.lan:8443", "https", "http://numi.lan:8443", False),
        ("numi.lan", "wss", "http://numi.lan", False),
        ("numi.lan", "https", "https://numi.lan", True),
        ("numi.lan", "wss", "https://numi.lan", True),
        ("localhost:8765", "http", "http://localhost:8765", True),
        # A proxy that ends TLS without X-Forwarded-Proto: the app sees http.
        ("numi.lan", "http", "https://numi.lan", True),
    ],
)
def test_the_origin_scheme_must_be_the_request_scheme(host, scheme, origin, same):
    from numi.web.security import same_origin

    assert same_origin(origin, host, scheme) is same


def test_an_http_origin_cannot_write_to_the_https_site(make_app):
    """Behind a trusted TLS proxy (X-Forwarded-Proto: https), an http Origin is refused."""
    client = make_app(NUMI_TRUSTED_PROXIES=1).test_client()
    tls = {"Host": "localhost", "X-Forwarded-Proto": "https"}
    plain = client.post("/api/session", json={}, headers={**tls, "Origin": "http://localhost"})
    assert plain.status_code == 403 and plain.get_json()["error"]["code"] == "bad_origin"
    own = client.post("/api/session", json={}, headers={**tls, "Origin": "https://localhost"})
    assert own.status_code == 201


def test_another_port_of_a_portless_host_is_refused_for_writes_and_websockets(sqlite_client):
    chat_id = sqlite_client.post("/api/session", json={}).get_json()["id"]
    other = {"Host": "localhost", "Origin": "http://localhost:9999"}
    write = sqlite_client.post("/api/session", json={"title": "x"}, headers=other)
    assert write.status_code == 403 and write.get_json()["error"]["code"] == "bad_origin"
    upgrade = sqlite_client.get(f"/ws/{chat_id}", headers={**WS_HEADERS, **other})
    assert upgrade.status_code == 403 and upgrade.headers.get("Upgrade") is None
    own = {"Host": "localhost", "Origin": "http://localhost"}
    assert sqlite_client.post("/api/session", json={"title": "x"}, headers=own).status_code == 201


def test_websocket_clients_send_the_port_in_host_as_browsers_do(live_server):
    """simple_websocket's own client drops the port from Host, which no browser does: with the
    Origin of the page it pretends to be, the live server takes it for another port's page.
    The tests' and benchmarks' client (numi.testing.websocket_client) sends host:port."""
    from simple_websocket import Client
    from simple_websocket.errors import ConnectionError as WsConnectionError

    from numi.testing.websocket_client import WebSocketClient

    chat = Api(live_server.url, token=live_server.token).post("/api/session", {})[1]
    url = f"ws://127.0.0.1:{live_server.port}/ws/{chat['id']}?format=json"
    headers = {"Origin": live_server.url, **live_server.headers}
    with pytest.raises(WsConnectionError) as refused:
        Client.connect(url, headers=headers)
    assert refused.value.status_code == 403
    socket = WebSocketClient.connect(url, headers=headers)
    assert socket.connected
    socket.close()


def test_pages_send_a_strict_content_security_policy(sqlite_client):
    response = sqlite_client.get("/")
    csp = response.headers["Content-Security-Policy"]
    script_src = next(part for part in csp.split(";") if part.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert '"allowEval":false' in response.get_data(as_text=True)


# --- multi-user mode -----------------------------------------------------------------------


def test_login_is_required(multi_app, users):
    client = multi_app.test_client()
    for url in ("/", "/settings", "/chats"):
        response = client.get(url)
        assert response.status_code == 302 and "/login" in response.headers["Location"], url
    for method, url in (
        ("GET", "/api/sessions"),
        ("POST", "/api/session"),
        ("GET", "/api/endpoints"),
    ):
        response = client.open(url, method=method, json={})
        assert response.status_code == 401
        assert response.get_json()["error"]["code"] == "auth_required"
    assert client.get("/", headers={"HX-Request": "true"}).status_code == 401
    assert client.get("/ws/whatever", headers=WS_HEADERS).status_code == 401
    assert client.get("/healthz").status_code == 200
    assert client.get("/login").status_code == 200


def test_wrong_password_and_unknown_user_are_refused_alike(multi_app, users):
    client = multi_app.test_client()
    wrong = client.post("/login", data={"username": "alice", "password": "wrong password"})
    unknown = client.post("/login", data={"username": "nobody", "password": "wrong password"})
    for response in (wrong, unknown):
        assert response.status_code == 401
        assert "Wrong username or password." in response.get_data(as_text=True)
    assert client.get("/api/sessions").status_code == 401


def test_login_then_logout(multi_app, users, login):
    client = multi_app.test_client()
    response = login(client, users["a"], next_url="/settings")
    assert response.headers["Location"] == "/settings"
    assert client.get("/api/sessions").status_code == 200
    assert "Log out alice" in client.get("/").get_data(as_text=True)
    client.post("/logout")
    assert client.get("/api/sessions").status_code == 401


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
        "http:evil.example",
    ],
)
def test_login_next_never_leaves_the_site(multi_app, users, target):
    from urllib.parse import quote

    client = multi_app.test_client()
    response = client.post(
        f"/login?next={quote(target)}", data={"username": "alice", "password": users["a"].password}
    )
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_bearer_tokens_work_for_the_api_and_skip_the_origin_check(multi_app, users):
    client = multi_app.test_client()
    auth = users["a"].auth_header
    created = client.post(
        "/api/session",
        json={"title": "by token"},
        headers={**auth, "Origin": "http://tool.example"},
    )
    assert created.status_code == 201
    assert [
        s["title"] for s in client.get("/api/sessions", headers=auth).get_json()["sessions"]
    ] == ["by token"]
    bad = client.get("/api/sessions", headers={"Authorization": "Bearer numi_not-a-real-token"})
    assert bad.status_code == 401 and bad.get_json()["error"]["code"] == "auth_invalid"
    # The token is user A's: user B's token does not see the chat.
    assert client.get("/api/sessions", headers=users["b"].auth_header).get_json()["sessions"] == []


def test_session_cookie_writes_still_need_a_same_site_origin(multi_app, users, login):
    client = multi_app.test_client()
    login(client, users["a"])
    refused = client.post(
        "/api/session", json={"title": "csrf"}, headers={"Origin": "http://evil.example"}
    )
    assert refused.status_code == 403
    assert client.get("/api/sessions").get_json()["sessions"] == []
    # The login form itself refuses a cross-site post (login CSRF).
    other = multi_app.test_client()
    response = other.post(
        "/login",
        data={"username": "alice", "password": users["a"].password},
        headers={"Origin": "http://evil.example"},
    )
    assert response.status_code == 403
