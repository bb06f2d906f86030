"""Settings in sections (issue 25 item 8): one server-rendered URL per section, the old
/settings as the list beside the first section, forms that come back to their own section."""

from __future__ import annotations

import re

from numi.web.pages.settings import SECTIONS

from turn_support import ACCESS_TOKEN


def _heading(html: str) -> str:
    return re.search(r'<h2 id="section-title">([^<]*)</h2>', html).group(1)


def test_every_section_has_its_own_url_and_the_navigation_marks_it(sqlite_client):
    index = sqlite_client.get("/settings")
    assert index.status_code == 200
    html = index.get_data(as_text=True)
    assert _heading(html) == "Appearance" and "settings-index" in html
    assert 'aria-current="page"' not in html, "the list is not one of its sections"
    for slug, title in SECTIONS.items():
        assert f'href="/settings/{slug}"' in html
        page = sqlite_client.get(f"/settings/{slug}")
        assert page.status_code == 200, slug
        html = page.get_data(as_text=True)
        assert _heading(html) == title
        assert f'<a href="/settings/{slug}" aria-current="page">{title}</a>' in html
        assert f"<title>{title} · Settings · Numi</title>" in html
    assert sqlite_client.get("/settings/nothing-here").status_code == 404


def test_forms_without_javascript_come_back_to_their_section(sqlite_client):
    cases = {
        "/settings/appearance": ({"theme": "dark"}, "/settings/appearance"),
        "/settings/voice": ({"endpoint_id": ""}, "/settings/voice"),
        "/settings/memory": ({"memory": "1"}, "/settings/memory"),
        "/settings/web-search": ({"search_backend": ""}, "/settings/web-search"),
        "/settings/fallbacks": ({}, "/settings/endpoints#fallbacks"),
        "/settings/documents/index": ({}, "/settings/documents"),
    }
    for url, (data, target) in cases.items():
        response = sqlite_client.post(url, data=data)
        assert response.status_code in (302, 303), url
        assert response.headers["Location"] == target, url


def test_the_theme_saves_in_the_background(sqlite_client):
    saved = sqlite_client.post(
        "/settings/appearance", data={"theme": "light"}, headers={"HX-Request": "true"}
    )
    assert saved.status_code == 204 and saved.get_data() == b""
    assert sqlite_client.get("/api/preferences").get_json()["theme"] == "light"
    refused = sqlite_client.post(
        "/settings/appearance", data={"theme": "purple"}, headers={"HX-Request": "true"}
    )
    assert refused.status_code == 400
    assert sqlite_client.get("/api/preferences").get_json()["theme"] == "light"


def test_without_an_endpoint_the_start_page_leads_to_settings_endpoints(sqlite_client):
    html = sqlite_client.get("/").get_data(as_text=True)
    assert '<a href="/settings/endpoints">Add one in Settings</a>' in html


def test_a_refused_form_shows_its_own_section_with_the_error(sqlite_client):
    page = sqlite_client.post("/settings/prompts", data={"command": "x", "title": "", "text": ""})
    assert page.status_code == 400
    html = page.get_data(as_text=True)
    assert _heading(html) == "Prompts" and 'data-code="invalid_title"' in html


def test_single_user_account_section_signs_this_browser_out(sqlite_app):
    browser = sqlite_app.test_client(access_token=None)  # a cookie, as a browser has
    origin = {"Origin": "http://localhost"}
    browser.post("/token", data={"token": ACCESS_TOKEN, "next": "/"}, headers=origin)
    html = browser.get("/settings/account").get_data(as_text=True)
    assert "no username or password" in html and "numi token show" in html
    assert '<form method="post" action="/logout">' in html
    assert browser.post("/logout", headers=origin).status_code == 302
    assert browser.get("/settings/account").status_code == 401, "the token is needed again"
