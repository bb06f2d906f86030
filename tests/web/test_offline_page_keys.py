"""The page key the service worker keys its kept pages to (numi/web/offline_pages.py),
without a browser: every response of a signed-in browser names its session's key (header
and cookie, the same value); another user, a new sign-in and a session ended elsewhere
each have another key or none, and a response without a session deletes the cookie; a
program's token leaves both alone. A temporary chat's pages are `no-store`."""

from __future__ import annotations

from numi.web.offline_pages import PAGE_KEY_COOKIE, PAGE_KEY_HEADER


def key_of(client, path: str = "/"):
    """The key a page names (header), checked against the cookie the browser now holds."""
    response = client.get(path)
    cookie = client.get_cookie(PAGE_KEY_COOKIE)
    header = response.headers.get(PAGE_KEY_HEADER)
    assert header == (cookie.value if cookie else None), (header, cookie)
    return response, header


def test_each_session_names_its_own_key_and_an_ended_one_none(
    multi_app, users, client_a, client_b, login
):
    _, alice = key_of(client_a)
    _, bob = key_of(client_b)
    assert alice and bob and alice != bob
    assert key_of(client_a)[1] == alice  # the same session keeps its key
    # Fragments and the API name it too (a worker sees only navigations, but any may be one).
    assert client_a.get("/api/sessions").headers[PAGE_KEY_HEADER] == alice

    # Logged out: no key, and the cookie goes.
    client_a.post("/logout")
    response, key = key_of(client_a)
    assert response.status_code == 302 and key is None
    # Signed in again, even as the same person: a new session, a new key.
    login(client_a, users["a"])
    _, again = key_of(client_a)
    assert again and again not in (alice, bob)

    # Log out everywhere from another browser ends this session: the redirect to the login
    # page names no key and deletes the cookie.
    elsewhere = multi_app.test_client()
    login(elsewhere, users["a"])
    elsewhere.post("/settings/logout-everywhere")
    response, key = key_of(client_a, "/c/00000000-0000-4000-8000-000000000000")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    assert key is None and client_a.get_cookie(PAGE_KEY_COOKIE) is None


def test_a_program_token_leaves_the_page_key_alone(multi_app, users, client_a):
    _, alice = key_of(client_a)
    response = client_a.get("/api/sessions", headers=users["b"].auth_header)
    assert response.status_code == 200 and PAGE_KEY_HEADER not in response.headers
    assert client_a.get_cookie(PAGE_KEY_COOKIE).value == alice


def test_single_user_sign_in_starts_a_new_key(sqlite_app):
    from numi.sign_in_links import new_code

    token = sqlite_app.config["NUMI_ACCESS_TOKEN"]
    browser = sqlite_app.test_client(access_token=None)  # a browser, not a program
    response, key = key_of(browser)
    assert response.status_code == 401 and key is None  # the token form
    browser.post("/sign-in", data={"code": new_code(token), "next": "/"})
    _, first = key_of(browser)
    browser.post("/token", data={"token": token, "next": "/"})
    _, second = key_of(browser)
    assert first and second and first != second


def test_a_temporary_chats_pages_are_no_store(sqlite_app):
    from numi.sign_in_links import new_code

    browser = sqlite_app.test_client(access_token=None)  # a browser, not a program
    browser.post(
        "/sign-in", data={"code": new_code(sqlite_app.config["NUMI_ACCESS_TOKEN"]), "next": "/"}
    )
    normal = browser.post("/api/session", json={"title": "Normal"}).get_json()
    temporary = browser.post("/api/session", json={"temporary": True}).get_json()
    for path in ("/c/{}", "/c/{}/messages"):
        kept = browser.get(path.format(normal["id"]))
        assert kept.status_code == 200 and "no-store" not in kept.headers["Cache-Control"]
        for headers in ({}, {"HX-Request": "true"}):
            page = browser.get(path.format(temporary["id"]), headers=headers)
            assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
