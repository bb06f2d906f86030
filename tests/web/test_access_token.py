"""Single-user mode's access token (DESIGN §7, as Jupyter does): every request needs it once,
by a one-time sign-in link, a bearer header (or ?token= on an API route) or the token form;
then the session cookie carries it.

Clients made by the fixtures carry the token; `app.test_client(access_token=None)` is a
stranger on the same machine (another local process or OS user)."""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import logging
import re
import sqlite3
import stat
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from numi.testing.websocket_client import WebSocketClient
from simple_websocket.errors import ConnectionClosed as WsConnectionClosed
from simple_websocket.errors import ConnectionError as WsConnectionError
from turn_support import ACCESS_TOKEN

from numi.extensions import db
from numi.models import Chat
from numi.sign_in_links import new_code

WS_HEADERS = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


def _chat_count(app) -> int:
    with app.app_context():
        return db.session.execute(db.select(db.func.count()).select_from(Chat)).scalar_one()


def _sign_in(browser, path: str = "/"):
    """Follow a fresh one-time link in a test client as a browser without JavaScript does:
    its page, then the post of its form. Returns the post's response."""
    code = new_code(ACCESS_TOKEN)
    assert browser.get(f"/sign-in?code={code}").status_code == 200
    return browser.post(
        "/sign-in", data={"code": code, "next": path}, headers={"Origin": "http://localhost"}
    )


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


def test_a_page_url_with_the_access_token_signs_nothing_in(sqlite_client, sqlite_app):
    """Issue 28 item 11: the token in a page's URL stays in the browser's history whatever the
    server answers, so a page no longer takes it: the token form, no cookie."""
    chat_id = sqlite_client.post("/api/session", json={"title": "mine"}).get_json()["id"]
    browser = sqlite_app.test_client(access_token=None)
    response = browser.get(f"/c/{chat_id}?token={ACCESS_TOKEN}&q=1")
    html = response.get_data(as_text=True)
    assert response.status_code == 401 and "mine" not in html
    assert "no longer sign in" in html and 'name="token"' in html
    assert f'name="next" value="/c/{chat_id}?q=1"' in html and ACCESS_TOKEN not in html
    assert browser.get_cookie("session") is None
    assert browser.get(f"/c/{chat_id}").status_code == 401


def test_the_one_time_link_signs_in_once(client, app):
    chat_id = client.post("/api/session", json={"title": "mine"}).get_json()["id"]
    code = new_code(ACCESS_TOKEN)
    link = f"/sign-in?code={code}&next=/c/{chat_id}%3Fq%3D1"
    browser = app.test_client(access_token=None)
    page = browser.get(link)
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "mine" not in html
    assert page.headers["Cache-Control"] == "no-store"
    form = re.search(
        r'<form id="sign-in-form" method="post" action="/sign-in"[^>]*>(.*?)</form>', html, re.S
    )
    assert form and f'name="code" value="{code}"' in form.group(1)
    assert f'name="next" value="/c/{chat_id}?q=1"' in form.group(1)
    assert '<button type="submit"' in form.group(1)  # the way in without JavaScript
    assert "/static/js/sign_in" in html and "<script>" not in html
    # A GET spends nothing and sets no cookie: a link preview cannot use the link up.
    assert browser.get_cookie("session") is None and browser.get(link).status_code == 200

    # Another site's page cannot post it (and spends nothing).
    foreign = browser.post(
        "/sign-in", data={"code": code, "next": "/"}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and browser.get_cookie("session") is None

    posted = browser.post(
        "/sign-in",
        data={"code": code, "next": f"/c/{chat_id}?q=1"},
        headers={"Origin": "http://localhost"},
    )
    assert posted.status_code == 303 and posted.headers["Location"] == f"/c/{chat_id}?q=1"
    assert ACCESS_TOKEN not in browser.get_cookie("session").value
    assert "mine" in browser.get(f"/c/{chat_id}").get_data(as_text=True)

    # Spent: the link in the history opens nothing for anyone else.
    other = app.test_client(access_token=None)
    for response in (
        other.get(link),
        other.post("/sign-in", data={"code": code}, headers={"Origin": "http://localhost"}),
    ):
        assert response.status_code == 401 and "used already" in response.get_data(as_text=True)
    assert other.get_cookie("session") is None and other.get("/").status_code == 401

    # Wrong codes: another token's, a changed MAC, a changed nonce, garbage.
    nonce, mac = new_code(ACCESS_TOKEN).split(".")
    for wrong in (
        new_code("another-token"),
        f"{nonce}.{mac[:-1]}{'A' if mac[-1] != 'A' else 'B'}",
        f"{'A' if nonce[0] != 'A' else 'B'}{nonce[1:]}.{mac}",
        "x",
        "",
        "é" * 16 + "." + mac,
    ):
        response = other.post(
            "/sign-in", data={"code": wrong}, headers={"Origin": "http://localhost"}
        )
        assert response.status_code == 401 and other.get_cookie("session") is None, wrong
    # The untouched code still works: wrong guesses spend nothing.
    assert (
        other.post(
            "/sign-in", data={"code": f"{nonce}.{mac}"}, headers={"Origin": "http://localhost"}
        ).status_code
        == 303
    )


def test_a_signed_in_browser_spends_the_link_it_opens(sqlite_app):
    """The link goes into the history of a browser that was signed in already, too."""
    browser = sqlite_app.test_client(access_token=None)
    assert _sign_in(browser).status_code == 303
    code = new_code(ACCESS_TOKEN)
    again = browser.get(f"/sign-in?code={code}&next=/settings")
    assert again.status_code == 302 and again.headers["Location"] == "/settings"
    other = sqlite_app.test_client(access_token=None)
    assert other.get(f"/sign-in?code={code}").status_code == 401
    assert other.get_cookie("session") is None


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
    _sign_in(stranger)
    assert stranger.get("/api/sessions").status_code == 200
    assert (
        stranger.get("/api/sessions", headers={"Authorization": "Bearer guess"}).status_code == 401
    )


def test_a_forged_or_stale_cookie_is_refused(make_app):
    first = make_app()
    browser = first.test_client(access_token=None)
    _sign_in(browser)
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

    # A browser-like client: a one-time link once, then the cookie, also for the WebSocket.
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert _follow(live_server, live_server.auth_url("/"), opener) == live_server.url + "/"
    assert _status(live_server.url + "/api/sessions", opener=opener) == 200
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    ws = WebSocketClient.connect(
        f"ws://127.0.0.1:{live_server.port}/ws/{chat['id']}?format=json",
        headers={"Origin": live_server.url, "Cookie": cookie},
    )
    ws.close()


LINK = re.compile(r"Numi is running on (http://127\.0\.0\.1:\d+/sign-in\?code=[\w-]+\.[\w-]+)\s")


def _follow(server, link: str, opener) -> str:
    """Open a sign-in link as a browser without JavaScript: its page, then a click on its
    button (the form's post). Returns the URL the post ends on."""
    with opener.open(link, timeout=10) as response:
        html = response.read().decode()
    code = re.search(r'name="code" value="([^"]+)"', html).group(1)
    target = re.search(r'name="next" value="([^"]+)"', html).group(1)
    request = urllib.request.Request(
        server.url + "/sign-in",
        data=urllib.parse.urlencode({"code": code, "next": target}).encode(),
        headers={"Origin": server.url},
    )
    with opener.open(request, timeout=10) as response:
        assert response.status == 200
        return response.url


def test_serve_prints_a_one_time_link_and_keeps_the_generated_token(live_server_factory):
    server = live_server_factory(NUMI_ACCESS_TOKEN="")
    stored = server.data_dir / "access_token"
    token = stored.read_text().strip()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    (link,) = LINK.findall(server.log())
    assert token not in server.log()  # the token itself is printed nowhere
    # The printed link is one click (and, here, one button) to a working page.
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    assert _follow(server, link, opener) == server.url + "/"
    assert _status(server.url + "/settings", opener=opener) == 200
    # Once: the link in the history signs no other browser in.
    stranger = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    assert _status(link, opener=stranger) == 401
    server.restart()
    assert stored.read_text().strip() == token
    first, second = LINK.findall(server.log())
    assert first == link and second != link
    assert _follow(server, second, stranger) == server.url + "/"
    assert (
        _status(server.url + "/api/sessions", headers={"Authorization": f"Bearer {token}"}) == 200
    )
    server.stop()


def test_racing_posts_of_one_link_sign_in_one_browser(live_server):
    """Ten browsers posting one code at once: the database lets exactly one spend it."""
    from concurrent.futures import ThreadPoolExecutor

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None  # the 303 itself is the answer that counts

    code = new_code(live_server.token)
    body = urllib.parse.urlencode({"code": code, "next": "/settings"}).encode()

    def post(_):
        return _status(
            live_server.url + "/sign-in",
            data=body,
            headers={
                "Origin": live_server.url,
                "Content-Type": "application/x-www-form-urlencoded",
            },
            opener=urllib.request.build_opener(NoRedirect),
        )

    with ThreadPoolExecutor(10) as pool:
        statuses = sorted(pool.map(post, range(10)))
    assert statuses == [303] + [401] * 9, statuses


def test_serve_uses_numi_access_token_and_auth_none_warns(live_server, live_server_factory):
    assert LINK.search(live_server.log()) and ACCESS_TOKEN not in live_server.log()
    assert not (live_server.data_dir / "access_token").exists()
    open_server = live_server_factory(NUMI_AUTH="none", NUMI_LOG_LEVEL="WARNING")
    assert "NUMI_AUTH=none" in open_server.log() and "sign-in" not in open_server.log()
    assert _status(open_server.url + "/api/sessions") == 200
    open_server.stop()


def test_numi_open_opens_the_browser_at_a_new_one_time_link(live_server, tmp_path):
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
    link = re.search(r"Opening (\S+)", result.stdout).group(1)
    assert link.startswith(f"{live_server.url}/sign-in?code=") and ACCESS_TOKEN not in link
    deadline = time.monotonic() + 20
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.read_text().strip() == link
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    assert _follow(live_server, link, opener) == live_server.url + "/"


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
    # A one-time link: its code leaves the address bar, the page's WebSocket connects.
    page = browser.new_page()
    try:
        live_server.sign_in(page, f"/c/{chat['id']}")
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


def test_sign_out_retires_a_copied_cookie(sqlite_app):
    """Issue 34: in single-user mode, Sign out only cleared this browser's cookie; a copy
    taken before (another tab, a stolen cookie file) still opened everything."""
    browser = sqlite_app.test_client(access_token=None)
    _sign_in(browser)
    copied = sqlite_app.test_client(access_token=None)
    copied.set_cookie("session", browser.get_cookie("session").value)
    assert copied.get("/api/sessions").status_code == 200
    out = browser.post("/logout", headers={"Origin": "http://localhost"})
    assert out.status_code == 302
    _assert_refused_json(browser.get("/api/sessions"))
    _assert_refused_json(copied.get("/api/sessions"))
    assert copied.get("/").status_code == 401  # the token form
    # Programs with the token go on; a new sign-in works again.
    program = sqlite_app.test_client(access_token=None)
    headers = {"Authorization": f"Bearer {ACCESS_TOKEN}"}
    assert program.get("/api/sessions", headers=headers).status_code == 200
    _sign_in(browser)
    assert browser.get("/api/sessions").status_code == 200
    _assert_refused_json(copied.get("/api/sessions"))


def test_sign_out_ends_the_open_sockets_of_a_copied_cookie(live_server_factory):
    from turn_support import Api

    server = live_server_factory()
    chat = Api(server.url, token=server.token).post("/api/session", {"title": "mine"})[1]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _follow(server, server.auth_url("/"), opener)
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    ws = WebSocketClient.connect(
        f"ws://127.0.0.1:{server.port}/ws/{chat['id']}?format=json",
        headers={"Origin": server.url, "Cookie": cookie},
    )
    out = urllib.request.Request(
        server.url + "/logout", data=b"", headers={"Origin": server.url, "Cookie": cookie}
    )
    with pytest.raises(urllib.error.HTTPError) as signed_out:  # its redirect: the token form
        urllib.request.urlopen(out, timeout=10)
    assert signed_out.value.code == 401
    ws.send(json.dumps({"type": "resume"}))
    # The socket ends: an `auth_required` error, then the close (which may overtake it).
    seen, deadline = "", time.monotonic() + 10
    while "auth_required" not in seen and time.monotonic() < deadline:
        try:
            seen += ws.receive(timeout=max(0.0, deadline - time.monotonic())) or ""
        except WsConnectionClosed:
            break
    else:
        assert "auth_required" in seen, f"the signed-out socket went on: {seen[:200]}"
    with contextlib.suppress(WsConnectionClosed):
        ws.close()
