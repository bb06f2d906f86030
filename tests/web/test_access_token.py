"""Single-user mode's access token (DESIGN §7, as Jupyter does): every request needs it once,
by ?token=, a bearer header or the token form; then the session cookie carries it.

Clients made by the fixtures carry the token; `app.test_client(access_token=None)` is a
stranger on the same machine (another local process or OS user)."""

from __future__ import annotations

import http.cookiejar
import logging
import re
import sqlite3
import stat
import time
import urllib.error
import urllib.request

import pytest
from numi.testing.websocket_client import WebSocketClient
from simple_websocket.errors import ConnectionError as WsConnectionError
from turn_support import ACCESS_TOKEN

from numi.extensions import db
from numi.models import Chat

WS_HEADERS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


def _chat_count(app) -> int:
    with app.app_context():
        return db.session.execute(db.select(db.func.count()).select_from(Chat)).scalar_one()


def _assert_refused_json(response):
    assert response.status_code == 401, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "auth_required"


# --- in-process: every kind of request ------------------------------------------------------


def test_requests_without_the_token_are_refused_and_change_nothing(app, client):
    chat_id = client.post("/api/session", json={"title": "mine"}).get_json()["id"]
    stranger = app.test_client(access_token=None)
    before = _chat_count(app)

    page = stranger.get(f"/c/{chat_id}")
    assert page.status_code == 401
    html = page.get_data(as_text=True)
    assert 'name="token"' in html and "mine" not in html
    for url in (
        "/api/sessions",
        f"/api/session/{chat_id}",
        f"/api/history/{chat_id}",
        f"/api/chat/resume/{chat_id}",
        f"/api/session/{chat_id}/export?fmt=json",
    ):
        _assert_refused_json(stranger.get(url))
    _assert_refused_json(stranger.post("/api/session", json={"title": "evil"}))
    _assert_refused_json(
        stranger.post("/api/chat_stream", json={"session": chat_id, "message": "run id"})
    )
    assert stranger.post("/chats", data={"title": "evil"}).status_code == 401
    assert stranger.post(f"/c/{chat_id}/delete").status_code == 401
    assert stranger.get("/settings").status_code == 401
    fragment = stranger.get("/chats", headers={"HX-Request": "true"})
    assert fragment.status_code == 401 and "mine" not in fragment.get_data(as_text=True)
    upgrade = stranger.get(f"/ws/{chat_id}", headers={**WS_HEADERS, "Origin": "http://localhost"})
    assert upgrade.status_code == 401 and upgrade.headers.get("Upgrade") is None

    assert _chat_count(app) == before
    assert client.get(f"/api/session/{chat_id}").get_json()["title"] == "mine"
    # What needs no token: the health check, static files and the login redirect.
    assert stranger.get("/healthz").status_code == 200
    assert stranger.get("/static/js/app.js").status_code == 200
    assert stranger.get_cookie("session") is None


def test_the_token_in_the_url_sets_the_cookie_and_leaves_the_url(sqlite_client, sqlite_app):
    chat_id = sqlite_client.post("/api/session", json={"title": "mine"}).get_json()["id"]
    browser = sqlite_app.test_client(access_token=None)
    response = browser.get(f"/c/{chat_id}?token={ACCESS_TOKEN}&q=1")
    assert response.status_code == 302
    # Redirected to the same page without the token: it stays out of history and Referer.
    assert response.headers["Location"] == f"/c/{chat_id}?q=1"
    assert browser.get_cookie("session") is not None
    assert ACCESS_TOKEN not in browser.get_cookie("session").value
    page = browser.get(f"/c/{chat_id}")
    assert page.status_code == 200 and "mine" in page.get_data(as_text=True)
    assert (
        browser.post(
            "/api/session", json={"title": "by cookie"}, headers={"Origin": "http://localhost"}
        ).status_code
        == 201
    )
    assert browser.get("/?token=" + ACCESS_TOKEN).headers["Location"] == "/"


def test_the_token_form_works_without_javascript_and_escapes_what_it_shows(sqlite_app):
    browser = sqlite_app.test_client(access_token=None)
    asked = browser.get('/c/x?a="><script>alert(1)</script>')
    assert asked.status_code == 401
    html = asked.get_data(as_text=True)
    form = re.search(r'<form method="post" action="/token"[^>]*>(.*?)</form>', html, re.S)
    assert form, html
    assert 'name="token"' in form.group(1) and 'type="password"' in form.group(1)
    assert 'name="next"' in form.group(1) and "<script>alert(1)" not in html
    assert "<script>" not in re.sub(
        r'<script src="[^"]+" defer></script>', "", html
    )  # no inline script
    assert "'unsafe-inline'" not in asked.headers["Content-Security-Policy"]

    hostile = '/settings"><script>alert(1)</script>'
    wrong = browser.post(
        "/token", data={"token": "guess", "next": hostile}, headers={"Origin": "http://localhost"}
    )
    html = wrong.get_data(as_text=True)
    assert wrong.status_code == 401 and "not right" in html
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert browser.get_cookie("session") is None

    right = browser.post(
        "/token",
        data={"token": ACCESS_TOKEN, "next": "/settings"},
        headers={"Origin": "http://localhost"},
    )
    assert right.status_code == 302 and right.headers["Location"] == "/settings"
    assert browser.get("/settings").status_code == 200
    # `next` is a path on this site only.
    other = sqlite_app.test_client(access_token=None)
    away = other.post("/token", data={"token": ACCESS_TOKEN, "next": "//evil.example/"})
    assert away.status_code == 302 and away.headers["Location"] == "/"


def test_a_bearer_header_works_and_a_wrong_token_is_refused(sqlite_app):
    stranger = sqlite_app.test_client(access_token=None)
    ok = stranger.get("/api/sessions", headers={"Authorization": f"Bearer {ACCESS_TOKEN}"})
    assert ok.status_code == 200
    assert stranger.get_cookie("session") is None  # a bearer client gets no cookie
    for wrong in ("guess", ACCESS_TOKEN[:-1], ACCESS_TOKEN + "x", ACCESS_TOKEN.upper(), ""):
        response = stranger.get("/api/sessions", headers={"Authorization": f"Bearer {wrong}"})
        assert response.status_code == 401, wrong
        assert response.get_json()["error"]["code"] in ("auth_invalid", "auth_required")
        page = stranger.get(f"/?token={wrong}")
        assert page.status_code == 401 and stranger.get_cookie("session") is None, wrong
    assert (
        stranger.post(
            "/api/session", json={}, headers={"Authorization": "Bearer guess"}
        ).status_code
        == 401
    )
    assert _chat_count(sqlite_app) == 0
    # A wrong header is refused even next to a good cookie.
    stranger.get("/?token=" + ACCESS_TOKEN)
    assert stranger.get("/api/sessions").status_code == 200
    assert (
        stranger.get("/api/sessions", headers={"Authorization": "Bearer guess"}).status_code == 401
    )


def test_a_forged_or_stale_cookie_is_refused(make_app):
    first = make_app()
    browser = first.test_client(access_token=None)
    browser.get("/?token=" + ACCESS_TOKEN)
    assert browser.get("/api/sessions").status_code == 200
    # Same secret key, new access token: the old cookie no longer opens anything.
    changed = make_app(NUMI_ACCESS_TOKEN="a-new-token")
    moved = changed.test_client(access_token=None)
    moved.set_cookie("session", browser.get_cookie("session").value)
    assert moved.get("/api/sessions").status_code == 401


def test_auth_none_turns_the_token_off_with_a_warning(make_app, caplog):
    with caplog.at_level(logging.WARNING):
        app = make_app(NUMI_AUTH="none")
    assert any(
        "NUMI_AUTH=none" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records
    )
    stranger = app.test_client(access_token=None)
    assert stranger.get("/api/sessions").status_code == 200
    assert stranger.post("/api/session", json={"title": "open"}).status_code == 201
    assert stranger.get("/").status_code == 200


def test_the_generated_token_is_kept_in_a_private_file(sqlite_app, tmp_path):
    from numi import create_app

    data_dir = tmp_path / "own"
    config = {
        "NUMI_DATA_DIR": str(data_dir),
        "NUMI_SECRET_KEY": "k",
        "NUMI_AUTO_ENDPOINTS": False,
        "NUMI_DATABASE_URL": f"sqlite:///{tmp_path / 'own.db'}",
    }
    token = create_app(config).config["NUMI_ACCESS_TOKEN"]
    stored = data_dir / "access_token"
    assert stored.read_text().strip() == token and len(token) >= 32
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert create_app(dict(config)).config["NUMI_ACCESS_TOKEN"] == token
    assert (
        create_app({**config, "NUMI_ACCESS_TOKEN": "from-env"}).config["NUMI_ACCESS_TOKEN"]
        == "from-env"
    )
    # Multi-user mode has logins instead and needs no access token.
    other = tmp_path / "multi"
    create_app({**config, "NUMI_DATA_DIR": str(other), "NUMI_AUTH": "multi"})
    assert not (other / "access_token").exists()


# --- the real server --------------------------------------------------------------------------


def _status(
    url: str, *, data: bytes | None = None, headers: dict | None = None, opener=None
) -> int:
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST" if data is not None else "GET",
    )
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _chats_in(server) -> int:
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as connection:
        return connection.execute("SELECT count(*) FROM chats").fetchone()[0]


def test_live_server_refuses_strangers_on_http_sse_and_websocket(live_server):
    from turn_support import SSE, Api

    chat = Api(live_server.url, token=live_server.token).post("/api/session", {"title": "mine"})[1]
    before = _chats_in(live_server)
    assert _status(live_server.url + "/") == 401
    assert _status(live_server.url + "/api/sessions") == 401
    assert (
        _status(live_server.url + "/api/session", data=b'{"settings": {"tools": ["bash"]}}') == 401
    )
    assert (
        _status(live_server.url + "/api/sessions", headers={"Authorization": "Bearer guess"}) == 401
    )
    stream = SSE(
        live_server,
        "POST",
        "/api/chat_stream",
        {"session": chat["id"], "message": "id"},
        headers={"Authorization": "Bearer guess"},
    )
    assert stream.response.status == 401
    stream.close()
    with pytest.raises(WsConnectionError) as refused:
        WebSocketClient.connect(
            f"ws://127.0.0.1:{live_server.port}/ws/{chat['id']}?format=json",
            headers={"Origin": live_server.url},
        )
    assert refused.value.status_code == 401
    assert _chats_in(live_server) == before
    assert _status(live_server.url + "/healthz") == 200

    # A browser-like client: ?token= once, then the cookie, also for the WebSocket.
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(live_server.auth_url("/"), timeout=10) as response:
        assert response.status == 200 and response.url == live_server.url + "/"
    assert _status(live_server.url + "/api/sessions", opener=opener) == 200
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    ws = WebSocketClient.connect(
        f"ws://127.0.0.1:{live_server.port}/ws/{chat['id']}?format=json",
        headers={"Origin": live_server.url, "Cookie": cookie},
    )
    ws.close()


def test_serve_prints_the_url_with_a_generated_token_kept_across_restarts(live_server_factory):
    server = live_server_factory(NUMI_ACCESS_TOKEN="")
    stored = server.data_dir / "access_token"
    token = stored.read_text().strip()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    url = f"http://127.0.0.1:{server.port}/?token={token}"
    assert url in server.log()
    # The printed link is one click to a working page: the cookie follows the redirect.
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    assert _status(url, opener=opener) == 200
    assert _status(server.url + "/settings", opener=opener) == 200
    server.restart()
    assert stored.read_text().strip() == token
    assert server.log().count(url) == 2
    assert (
        _status(server.url + "/api/sessions", headers={"Authorization": f"Bearer {token}"}) == 200
    )
    server.stop()


def test_serve_uses_numi_access_token_and_auth_none_warns(live_server, live_server_factory):
    assert f"{live_server.url}/?token={ACCESS_TOKEN}" in live_server.log()
    assert not (live_server.data_dir / "access_token").exists()
    open_server = live_server_factory(NUMI_AUTH="none", NUMI_LOG_LEVEL="WARNING")
    assert "NUMI_AUTH=none" in open_server.log() and "token=" not in open_server.log()
    assert _status(open_server.url + "/api/sessions") == 200
    open_server.stop()


def test_numi_open_opens_the_browser_at_the_url_with_the_token(live_server, tmp_path):
    opened = tmp_path / "opened"
    fake_browser = tmp_path / "browser"
    fake_browser.write_text(
        f'#!/bin/sh\necho "$1" > "{opened}.tmp" && mv "{opened}.tmp" "{opened}"\n'
    )
    fake_browser.chmod(0o700)
    live_server.env["BROWSER"] = str(fake_browser)
    try:
        result = live_server.cli("open")
    finally:
        live_server.env.pop("BROWSER")
    expected = live_server.auth_url("/")
    assert expected in result.stdout
    deadline = time.monotonic() + 20
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.read_text().strip() == expected


@pytest.mark.browser
def test_chromium_pastes_the_token_once_without_javascript_and_the_cookie_carries_it(
    browser, live_server
):
    from turn_support import Api

    chat = Api(live_server.url, token=live_server.token).post(
        "/api/session", {"title": "pasted here"}
    )[1]
    page = browser.new_page(java_script_enabled=False)
    try:
        assert page.goto(f"{live_server.url}/c/{chat['id']}").status == 401
        page.fill('input[name="token"]', live_server.token)
        page.click('button[type="submit"]')
        page.wait_for_url(f"{live_server.url}/c/{chat['id']}")
        assert "pasted here" in page.content()
        assert page.goto(f"{live_server.url}/settings").status == 200
    finally:
        page.close()
    # The printed link: the token leaves the address bar, the page's WebSocket connects.
    page = browser.new_page()
    try:
        page.goto(live_server.auth_url(f"/c/{chat['id']}"))
        assert page.url == f"{live_server.url}/c/{chat['id']}"
        page.wait_for_selector("#connection[data-state=open]", state="attached")
    finally:
        page.close()


def test_the_token_in_an_api_url_sets_no_cookie(sqlite_app):
    """A program's `?token=` on an API route authorises that request only (issue 28 item
    15): no session cookie that would outlive it."""
    program = sqlite_app.test_client(access_token=None)
    response = program.get(f"/api/sessions?token={ACCESS_TOKEN}")
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers
    assert program.get_cookie("session") is None
    assert program.get("/api/sessions").status_code == 401
