"""Login sessions (multi-user mode): same-site `next` only, cookies that die with logout and
password changes (a per-user session version), "Log out everywhere", Secure cookies and a
trusted reverse proxy for TLS deployments, a bounded cookie lifetime."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import pytest

from fixtures.users import password_hash

OPEN_REDIRECTS = [
    "/%09/evil.example",  # the tab is dropped by browsers: //evil.example
    "/%0a/evil.example",
    "/%0d%0aSet-Cookie:%20x=y",  # CR/LF: header injection attempt (was a 500)
    "/%5Cevil.example",  # /\evil.example: browsers read a backslash as a slash
    "/%2F/evil.example",  # decodes to //evil.example
    "%2F%2Fevil.example",
    "/%252F/evil.example",  # double-encoded
    "//evil.example/",
    "https://evil.example/",
    "/\\evil.example",
    "javascript:alert(1)",
    "http:evil.example",
    "/%00/evil.example",
    "/%7F/evil.example",
    "/\u2028/evil.example",
]


def _location(response) -> str:
    return response.headers["Location"]


@pytest.mark.parametrize("target", OPEN_REDIRECTS)
def test_login_next_accepts_only_same_site_paths(multi_app, users, target):
    client = multi_app.test_client()
    # The raw query string, exactly as an attacker's link would carry it.
    response = client.post(
        f"/login?next={target}", data={"username": "alice", "password": users["a"].password}
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    assert _location(response) == "/"


@pytest.mark.parametrize("target", ["/settings", "/c/abc?x=1&y=2", "/search?q=a%20b"])
def test_login_next_keeps_same_site_paths(multi_app, users, target):
    client = multi_app.test_client()
    from urllib.parse import quote

    response = client.post(
        f"/login?next={quote(target)}", data={"username": "alice", "password": users["a"].password}
    )
    assert response.status_code == 302 and _location(response) == target


@pytest.mark.parametrize(
    "target", ["/%09/evil.example", "/\t/evil.example", "/\r\nSet-Cookie: x=y"]
)
def test_the_token_form_next_accepts_only_same_site_paths(app, target):
    from turn_support import ACCESS_TOKEN

    stranger = app.test_client(access_token=None)
    response = stranger.post("/token", data={"token": ACCESS_TOKEN, "next": target})
    assert response.status_code == 302 and _location(response) == "/"


# --- cookies that end ---------------------------------------------------------------------


def _copy_cookie(source, target) -> None:
    cookie = source.get_cookie("session")
    assert cookie is not None
    target.set_cookie("session", cookie.value)


def test_logout_refuses_the_old_cookie(multi_app, users, login):
    client = multi_app.test_client()
    login(client, users["a"])
    stolen = multi_app.test_client()
    _copy_cookie(client, stolen)
    assert stolen.get("/api/sessions").status_code == 200
    client.post("/logout")
    assert client.get("/api/sessions").status_code == 401
    # The cookie saved before the logout (another tab, a copy an attacker took) is dead too.
    response = stolen.get("/api/sessions")
    assert response.status_code == 401 and response.get_json()["error"]["code"] == "auth_required"
    assert stolen.get("/settings").status_code == 302
    # Bob's sessions are not affected.
    bob = multi_app.test_client()
    login(bob, users["b"])
    assert bob.get("/api/sessions").status_code == 200


def _change_password(client, current: str, new: str, repeat: str | None = None, **headers):
    return client.post(
        "/settings/password",
        headers=headers,
        data={
            "current_password": current,
            "new_password": new,
            "repeat_password": new if repeat is None else repeat,
        },
    )


def test_the_settings_page_offers_a_password_change_and_log_out_everywhere(multi_app, users, login):
    client = multi_app.test_client()
    login(client, users["a"])
    html = client.get("/settings/account").get_data(as_text=True)
    assert 'action="/settings/password"' in html and 'name="current_password"' in html
    assert 'action="/settings/logout-everywhere"' in html and "Log out everywhere" in html


def test_a_password_change_ends_the_other_sessions(multi_app, users, login):
    here, elsewhere = multi_app.test_client(), multi_app.test_client()
    login(here, users["a"])
    login(elsewhere, users["a"])
    response = _change_password(here, users["a"].password, "a brand new password")
    assert response.status_code in (200, 302), response.get_data(as_text=True)
    assert here.get("/api/sessions").status_code == 200  # the browser that changed it stays in
    assert elsewhere.get("/api/sessions").status_code == 401
    assert password_hash(multi_app, "alice").startswith("$argon2id$")
    fresh = multi_app.test_client()
    assert (
        fresh.post(
            "/login", data={"username": "alice", "password": users["a"].password}
        ).status_code
        == 401
    )
    assert (
        fresh.post(
            "/login", data={"username": "alice", "password": "a brand new password"}
        ).status_code
        == 302
    )


@pytest.mark.parametrize(
    "current, new, repeat, message",
    [
        ("not my password", "a brand new password", None, "current password is not right"),
        (None, "short", None, "at least 8 characters"),
        (None, "a brand new password", "a different one", "do not match"),
    ],
)
def test_a_refused_password_change_changes_nothing(
    multi_app, users, login, current, new, repeat, message
):
    here, elsewhere = multi_app.test_client(), multi_app.test_client()
    login(here, users["a"])
    login(elsewhere, users["a"])
    before = password_hash(multi_app, "alice")
    response = _change_password(here, current or users["a"].password, new, repeat)
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    assert password_hash(multi_app, "alice") == before
    assert elsewhere.get("/api/sessions").status_code == 200


def test_a_cross_site_password_change_is_refused(multi_app, users, login):
    client = multi_app.test_client()
    login(client, users["a"])
    before = password_hash(multi_app, "alice")
    response = _change_password(
        client, users["a"].password, "evil new password", Origin="http://evil.example"
    )
    assert response.status_code == 403
    assert password_hash(multi_app, "alice") == before


def test_log_out_everywhere(multi_app, users, login):
    here, elsewhere, bob = (multi_app.test_client() for _ in range(3))
    login(here, users["a"])
    login(elsewhere, users["a"])
    login(bob, users["b"])
    # Another site cannot do it for the user.
    assert (
        here.post(
            "/settings/logout-everywhere", headers={"Origin": "http://evil.example"}
        ).status_code
        == 403
    )
    assert elsewhere.get("/api/sessions").status_code == 200
    response = here.post("/settings/logout-everywhere")
    assert response.status_code == 302 and "/login" in _location(response)
    assert here.get("/api/sessions").status_code == 401
    assert elsewhere.get("/api/sessions").status_code == 401
    assert bob.get("/api/sessions").status_code == 200
    # Logging in again works, with a fresh cookie.
    login(here, users["a"])
    assert here.get("/api/sessions").status_code == 200


# --- cookie flags, lifetime, proxies ------------------------------------------------------------


def _session_set_cookie(response) -> str:
    cookies = [
        value for value in response.headers.getlist("Set-Cookie") if value.startswith("session=")
    ]
    assert cookies, response.headers
    return cookies[-1]


def test_the_session_cookie_is_secure_only_when_configured(make_app, users, multi_app):
    plain = _session_set_cookie(
        multi_app.test_client().post(
            "/login", data={"username": "alice", "password": users["a"].password}
        )
    )
    assert "Secure" not in plain and "HttpOnly" in plain and "SameSite=Lax" in plain
    secure_app = make_app(NUMI_AUTH="multi", NUMI_SECURE_COOKIES=True)
    secure = _session_set_cookie(
        secure_app.test_client().post(
            "/login",
            base_url="https://localhost",
            data={"username": "alice", "password": users["a"].password},
        )
    )
    assert "Secure" in secure and "HttpOnly" in secure


def test_the_session_cookie_lifetime_is_bounded(make_app, users, multi_app):
    cookie = _session_set_cookie(
        multi_app.test_client().post(
            "/login", data={"username": "alice", "password": users["a"].password}
        )
    )
    expires = parsedate_to_datetime(cookie.split("Expires=")[1].split(";")[0])
    days = (expires - datetime.now(timezone.utc)).total_seconds() / 86400
    assert 6.9 < days <= 7.01, cookie
    short = make_app(NUMI_AUTH="multi", NUMI_SESSION_LIFETIME_HOURS=12)
    cookie = _session_set_cookie(
        short.test_client().post(
            "/login", data={"username": "alice", "password": users["a"].password}
        )
    )
    expires = parsedate_to_datetime(cookie.split("Expires=")[1].split(";")[0])
    assert (expires - datetime.now(timezone.utc)).total_seconds() <= 12 * 3600 + 60


def test_forwarded_host_is_honoured_only_behind_trusted_proxies(make_app):
    direct = make_app().test_client()
    # Not configured: X-Forwarded-Host is a header like any other and the Host check passes.
    assert (
        direct.get("/api/sessions", headers={"X-Forwarded-Host": "evil.example"}).status_code == 200
    )
    proxied = make_app(NUMI_TRUSTED_PROXIES=1, NUMI_ALLOWED_HOSTS=("numi.example",)).test_client()
    # Behind a trusted proxy, the host the browser asked for is the one checked.
    assert (
        proxied.get("/api/sessions", headers={"X-Forwarded-Host": "evil.example"}).status_code
        == 400
    )
    assert (
        proxied.get(
            "/api/sessions",
            headers={"X-Forwarded-Host": "numi.example", "X-Forwarded-Proto": "https"},
        ).status_code
        == 200
    )


# --- a live server: the WebSocket of a session that ended ---------------------------------------


def test_an_open_websocket_ends_with_its_session(live_server_factory):
    """A socket opened with a login cookie answers `auth_required` and closes at its next
    message once the user has logged out (elsewhere); a bearer-token socket is not a session."""
    import http.cookiejar
    import json
    import urllib.parse
    import urllib.request

    from numi.testing.websocket_client import WebSocketClient as Client

    server = live_server_factory(NUMI_AUTH="multi")
    try:
        server.cli("user", "create", "alice", "--password-stdin", input="alice's password\n")
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        form = urllib.parse.urlencode(
            {"username": "alice", "password": "alice's password"}
        ).encode()
        browser.open(urllib.request.Request(server.url + "/login", data=form), timeout=30).read()
        cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
        chat = json.loads(
            browser.open(
                urllib.request.Request(
                    server.url + "/api/session",
                    data=b"{}",
                    headers={"Content-Type": "application/json", "Origin": server.url},
                ),
                timeout=30,
            ).read()
        )

        ws = Client.connect(
            f"ws://127.0.0.1:{server.port}/ws/{chat['id']}?format=json",
            headers={"Origin": server.url, "Cookie": cookie},
        )
        ws.send(json.dumps({"type": "approve", "call_id": "none", "decision": "deny"}))
        assert json.loads(ws.receive(timeout=10))["data"]["code"] == "no_such_approval"

        # Logged out in another tab (same cookie): the open socket's session is over.
        browser.open(
            urllib.request.Request(
                server.url + "/logout", data=b"", headers={"Origin": server.url}
            ),
            timeout=30,
        ).read()
        ws.send(json.dumps({"type": "approve", "call_id": "none", "decision": "deny"}))
        assert json.loads(ws.receive(timeout=10))["data"]["code"] == "auth_required"
        from simple_websocket import ConnectionClosed

        with pytest.raises(ConnectionClosed):
            ws.receive(timeout=10)
            ws.send(json.dumps({"type": "stop"}))
            ws.receive(timeout=10)
    finally:
        server.stop()
