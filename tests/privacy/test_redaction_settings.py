"""The privacy gateway's settings (issue 41): the endpoint's Edit form and the API, on by
default only outside this machine's network, the user's words and patterns kept with their
labels, and a refused pattern changing nothing. The in-process Flask client."""

from __future__ import annotations

import re

HX = {"HX-Request": "true"}


def add(client, name: str, base_url: str) -> dict:
    response = client.post(
        "/api/endpoints",
        json={"name": name, "kind": "anthropic", "base_url": base_url, "api_key": "k"},
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def form(**fields) -> dict:
    return {
        "name": "Cloud",
        "kind": "anthropic",
        "base_url": "https://api.example.com",
        "enabled": ["0", "1"],
        "redaction_sent": "1",
        **fields,
    }


def test_on_by_default_outside_and_off_for_a_local_server(sqlite_app):
    client = sqlite_app.test_client()
    cloud = add(client, "Cloud", "https://api.example.com")
    local = add(client, "Local", "http://127.0.0.1:8080")
    assert (cloud["redaction"]["enabled"], cloud["redaction"]["automatic"]) == (True, True)
    assert (local["redaction"]["enabled"], local["redaction"]["automatic"]) == (False, True)
    assert cloud["prompt_caching"] is True
    page = client.get(f"/settings/endpoints/{cloud['id']}/edit", headers=HX).get_data(as_text=True)
    assert "Automatic (on: outside this network)" in page
    card = client.get(f"/settings/endpoints/{cloud['id']}").get_data(as_text=True)
    assert ">redacts<" in card
    assert ">redacts<" not in client.get(f"/settings/endpoints/{local['id']}").get_data(
        as_text=True
    )


def test_the_edit_form_saves_rules_words_and_patterns(sqlite_app):
    client = sqlite_app.test_client()
    cloud = add(client, "Cloud", "https://api.example.com")
    response = client.post(
        f"/settings/endpoints/{cloud['id']}",
        data=form(
            redaction_enabled="1",
            redaction_rules=["email", "card"],
            redaction_words="Jane Roe\nCLIENT: Acme <b>GmbH</b>\n",
            redaction_patterns="CASE: CASE-\\d{4}\n",
            prompt_caching=["0"],
        ),
        headers=HX,
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    (saved,) = client.get("/api/endpoints").get_json()["endpoints"]
    assert saved["redaction"] == {
        "enabled": True,
        "automatic": False,
        "outside": True,
        "rules": ["email", "card"],
        "words": [
            {"text": "Jane Roe", "label": "NAME"},
            {"text": "Acme <b>GmbH</b>", "label": "CLIENT"},
        ],
        "patterns": [{"pattern": "CASE-\\d{4}", "label": "CASE"}],
    }
    assert saved["prompt_caching"] is False
    page = client.get(f"/settings/endpoints/{cloud['id']}/edit", headers=HX).get_data(as_text=True)
    assert "CLIENT: Acme &lt;b&gt;GmbH&lt;/b&gt;" in page  # escaped, as every user text
    assert re.search(r'value="card" checked', page) and not re.search(r'value="ip" checked', page)
    # The API changes the fields it names and keeps the others.
    client.patch(f"/api/endpoints/{cloud['id']}", json={"redaction": {"enabled": None}})
    (saved,) = client.get("/api/endpoints").get_json()["endpoints"]
    assert saved["redaction"]["automatic"] is True and len(saved["redaction"]["words"]) == 2


def test_a_slow_pattern_in_the_form_is_refused_and_nothing_changes(sqlite_app):
    client = sqlite_app.test_client()
    cloud = add(client, "Cloud", "https://api.example.com")
    response = client.post(
        f"/settings/endpoints/{cloud['id']}",
        data=form(name="Renamed", redaction_enabled="0", redaction_patterns="X: (a+)+$"),
        headers=HX,
    )
    assert response.status_code == 400
    assert "exponential time" in response.get_data(as_text=True)
    (kept,) = client.get("/api/endpoints").get_json()["endpoints"]
    assert kept["name"] == "Cloud" and kept["redaction"]["enabled"] is True


def test_the_context_panel_marks_what_will_be_replaced_and_in_which_part(sqlite_app):
    client = sqlite_app.test_client()
    cloud = add(client, "Cloud", "https://api.example.com")
    chat = client.post(
        "/api/session",
        json={
            "endpoint_id": cloud["id"],
            "model": "claude-x",
            "settings": {"system_prompt": "Mail <i>jane@example.com</i> or +49 30 1234567."},
        },
    ).get_json()
    page = client.get(f"/c/{chat['id']}/context_panel", headers=HX).get_data(as_text=True)
    assert (
        '<mark class="redact" data-label="EMAIL"><button type="button" class="redact-exempt" '
        'aria-pressed="false" data-value="jane@example.com" title="Sent as [EMAIL_…]. Press to '
        'send it as it is, in your next message only.">jane@example.com</button></mark>'
    ) in page
    assert 'data-label="PHONE"' in page and "&lt;i&gt;" in page  # the rest escaped
    assert "2 items will be replaced before the request leaves (email 1, phone 1)" in page
    client.patch(f"/api/endpoints/{cloud['id']}", json={"redaction": {"enabled": False}})
    page = client.get(f"/c/{chat['id']}/context_panel", headers=HX).get_data(as_text=True)
    assert "<mark" not in page and "context-redaction" not in page
