"""A project's defaults for its chats on the project page (issue 21): the model, tools and
workspace a new chat takes and the project's fallback chain, edited by one form that works
without JavaScript (row buttons re-render, Save saves) and swaps itself under htmx. Bad
input answers the chat settings' codes and changes nothing; a non-admin gets no
workspace. On SQLite and PostgreSQL (`client` is parametrised)."""

from __future__ import annotations

import re

import pytest


@pytest.fixture
def setup(client, tmp_path):
    made = client.post("/projects", data={"name": "Kitchen"})
    assert made.status_code == 303
    project_id = int(made.headers["Location"].rsplit("/", 1)[1])
    endpoint = client.post(
        "/api/endpoints",
        json={
            "name": "Local",
            "kind": "openai_chat",
            "base_url": "http://127.0.0.1:9/v1",
            "default_model": "main-model",
        },
    ).get_json()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return {"project": project_id, "endpoint": endpoint["id"], "workspace": str(workspace)}


def form(setup, **extra) -> dict:
    """The defaults form as the page posts it: a model, two tools, a policy, a workspace."""
    return {
        "route": f"{setup['endpoint']}:main-model",
        "tools_shown": "1",
        "tools": ["current_time", "search_documents"],
        "policy_search_documents": "ask",
        "auto_approve": "1",
        "workspace": setup["workspace"],
        "fallbacks_shown": "1",
        **extra,
    }


JSON = {"Accept": "application/json"}


def stored(client, project_id: int) -> dict:
    return client.get(f"/api/projects/{project_id}").get_json()["settings"]


def selected_routes(html: str) -> list[str]:
    block = html.split('id="project-fallbacks"', 1)[1].split("</fieldset>", 1)[0]
    return re.findall(r'<option value="([^"]+)" selected>', block)


def test_the_defaults_form_without_javascript(client, setup):
    project_id, endpoint_id = setup["project"], setup["endpoint"]
    page = client.get(f"/p/{project_id}").get_data(as_text=True)
    assert 'id="project-defaults"' in page and 'id="project-fallbacks"' in page
    assert 'name="tools"' in page and 'name="workspace"' in page  # single user: the admin
    url = f"/p/{project_id}/defaults"

    # A row button re-renders the whole page with the draft: nothing is saved, and the
    # ticked tools stay ticked.
    added = client.post(url, data=form(setup, fallback_action="add"))
    assert added.status_code == 200
    html = added.get_data(as_text=True)
    assert html.count('name="fallback_route"') == 1
    assert re.search(r'value="current_time" checked', html)
    assert stored(client, project_id) == {}
    two = form(
        setup,
        fallback_route=[f"{endpoint_id}:backup-a", f"{endpoint_id}:backup-b"],
        fallback_action="up:1",
    )
    html = client.post(url, data=two).get_data(as_text=True)
    assert selected_routes(html) == [f"{endpoint_id}:backup-b", f"{endpoint_id}:backup-a"]
    assert stored(client, project_id) == {}

    # Save saves it all; a row left on "Choose a model…" is dropped.
    saved = client.post(url, data=form(setup, fallback_route=[f"{endpoint_id}:backup-b", "", ""]))
    assert saved.status_code == 303 and saved.headers["Location"].endswith("#defaults")
    assert stored(client, project_id) == {
        "endpoint_id": endpoint_id,
        "model": "main-model",
        "tools": ["current_time", "search_documents"],
        "auto_approve": True,
        "tool_policy": {"search_documents": "ask"},
        "workspace": setup["workspace"],
        "fallbacks": [{"endpoint_id": endpoint_id, "model": "backup-b"}],
    }
    page = client.get(f"/p/{project_id}").get_data(as_text=True)
    assert selected_routes(page) == [f"{endpoint_id}:backup-b"]

    # A new chat there takes the model, tools and workspace; the chain stays the project's
    # (the chat uses it at each turn), and the chat's settings say so.
    started = client.post(f"/p/{project_id}/chats")
    chat_id = started.headers["Location"].rsplit("/", 1)[1]
    chat = client.get(f"/api/session/{chat_id}").get_json()
    assert chat["endpoint_id"] == endpoint_id and chat["model"] == "main-model"
    assert chat["settings"]["tools"] == ["current_time", "search_documents"]
    assert chat["settings"]["workspace"] == setup["workspace"]
    assert "fallbacks" not in chat["settings"]
    chat_page = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "With none here, the project&#39;s 1 fallback applies." in chat_page

    # Unticking every tool, emptying the workspace and the chain saves that too.
    cleared = {
        "route": f"{endpoint_id}:main-model",
        "tools_shown": "1",
        "workspace": "",
        "fallbacks_shown": "1",
    }
    assert client.post(url, data=cleared).status_code == 303
    assert stored(client, project_id) == {"endpoint_id": endpoint_id, "model": "main-model"}


def test_the_defaults_form_under_htmx_swaps_itself(client, setup):
    project_id, endpoint_id = setup["project"], setup["endpoint"]
    htmx = {"HX-Request": "true"}
    url = f"/p/{project_id}/defaults"
    added = client.post(url, data=form(setup, fallback_action="add"), headers=htmx)
    html = added.get_data(as_text=True)
    assert added.status_code == 200 and html.lstrip().startswith('<form id="project-defaults"')
    assert "Saved." not in html and stored(client, project_id) == {}
    saved = client.post(
        url, data=form(setup, fallback_route=f"{endpoint_id}:backup-a"), headers=htmx
    )
    html = saved.get_data(as_text=True)
    assert saved.status_code == 200 and "Saved." in html
    assert selected_routes(html) == [f"{endpoint_id}:backup-a"]
    assert stored(client, project_id)["fallbacks"] == [
        {"endpoint_id": endpoint_id, "model": "backup-a"}
    ]


def test_bad_defaults_are_refused_and_change_nothing(client, setup):
    project_id, endpoint_id = setup["project"], setup["endpoint"]
    url = f"/p/{project_id}/defaults"
    good = form(setup, fallback_route=f"{endpoint_id}:backup-a")
    assert client.post(url, data=good).status_code == 303
    before = stored(client, project_id)
    doomed = client.post(
        "/api/endpoints",
        json={"name": "Doomed", "kind": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
    ).get_json()
    assert client.delete(f"/api/endpoints/{doomed['id']}").status_code == 200
    cases = [
        ({"fallback_route": f"{endpoint_id}:main-model"}, "fallback_is_own_route"),
        ({"fallback_route": f"{doomed['id']}:m"}, "fallback_endpoint_not_found"),
        ({"fallback_route": [f"{endpoint_id}:b"] * 2}, "duplicate_fallback"),
        (
            {"fallback_route": [f"{endpoint_id}:m{n}" for n in range(11)]},
            "too_many_fallbacks",
        ),
        ({"workspace": "relative/path"}, "invalid_workspace"),
        ({"policy_current_time": "sometimes"}, "invalid_input"),
    ]
    for extra, code in cases:
        # (Accept: JSON reads the code; a browser gets the error page with its message.)
        response = client.post(url, data=form(setup, **extra), headers=JSON)
        assert (response.status_code, response.get_json()["error"]["code"]) == (400, code), extra
        assert stored(client, project_id) == before, extra
    page = client.post(url, data=form(setup, fallback_route=f"{endpoint_id}:main-model"))
    assert page.status_code == 400 and "is the chat&#39;s own model" in page.get_data(as_text=True)
    # The JSON API refuses the same chains with the same codes.
    for fallbacks, code in [
        ([{"endpoint_id": doomed["id"], "model": "m"}], "fallback_endpoint_not_found"),
        ([{"endpoint_id": endpoint_id, "model": "main-model"}], "fallback_is_own_route"),
    ]:
        response = client.patch(
            f"/api/projects/{project_id}",
            json={"settings": {**before, "fallbacks": fallbacks}},
        )
        assert (response.status_code, response.get_json()["error"]["code"]) == (400, code)
    assert stored(client, project_id) == before


def test_only_an_admin_gives_a_project_a_workspace(client_a, tmp_path):
    made = client_a.post("/projects", data={"name": "Mine"})
    project_id = int(made.headers["Location"].rsplit("/", 1)[1])
    page = client_a.get(f"/p/{project_id}").get_data(as_text=True)
    assert 'name="tools"' in page and 'name="workspace"' not in page
    (tmp_path / "workspace").mkdir()
    response = client_a.post(
        f"/p/{project_id}/defaults",
        data={"tools_shown": "1", "workspace": str(tmp_path / "workspace")},
        headers=JSON,
    )
    assert (response.status_code, response.get_json()["error"]["code"]) == (403, "admin_only")
    assert client_a.get(f"/api/projects/{project_id}").get_json()["settings"] == {}
