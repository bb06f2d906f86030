"""The budgets API (numi/web/budgets.py, numi/chat/budgets.py): each bad input gets its
stable code and changes nothing; a budget names what it is for and its state; multi-user
mode shows and lets each user change only their own. In-process, on each backend."""

from __future__ import annotations


def add_endpoint(client, name="OpenRouter") -> int:
    response = client.post(
        "/api/endpoints",
        json={
            "name": name,
            "kind": "openai_chat",
            "base_url": "https://llm.example.com/v1",  # never called: no turn runs here
            "api_key": "k",
            "default_model": "m",
        },
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def budgets_of(client) -> list[dict]:
    response = client.get("/api/budgets")
    assert response.status_code == 200
    return response.get_json()["budgets"]


def refused(response, code: str, status: int = 400) -> str:
    assert response.status_code == status, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code, error
    return error["message"]


TOKENS = {"scope": "user", "period": "month", "unit": "tokens", "soft_cap": 800, "hard_cap": 1000}

BAD = [
    ({"soft_cap": 1200}, "invalid_budget_cap"),  # soft above hard
    ({"hard_cap": 0}, "invalid_budget_cap"),
    ({"soft_cap": -5}, "invalid_budget_cap"),
    ({"hard_cap": "lots"}, "invalid_budget_cap"),
    ({"soft_cap": None, "hard_cap": None}, "invalid_budget_cap"),
    ({"period": "year"}, "invalid_budget"),
    ({"scope": "team"}, "invalid_budget"),
    ({"unit": "credits"}, "invalid_budget"),
    ({"timezone": "Europe/Atlantis"}, "invalid_timezone"),
    ({"colour": "blue"}, "unknown_field"),
]


def test_bad_input_is_refused_with_its_code_and_changes_nothing(client_a):
    kept = client_a.post("/api/budgets", json=TOKENS)
    assert kept.status_code == 201, kept.get_json()
    before = budgets_of(client_a)
    for change, code in BAD:
        refused(client_a.post("/api/budgets", json={**TOKENS, **change}), code)
        refused(client_a.patch(f"/api/budgets/{kept.get_json()['id']}", json=change), code)
    assert budgets_of(client_a) == before


def test_a_budget_for_another_users_project_or_endpoint_is_refused(client_a, client_b):
    theirs = add_endpoint(client_b, "Theirs")
    project = client_b.post("/api/projects", json={"name": "Secret"}).get_json()["id"]
    refused(
        client_a.post("/api/budgets", json={**TOKENS, "scope": "endpoint", "endpoint_id": theirs}),
        "unknown_endpoint",
        404,
    )
    refused(
        client_a.post("/api/budgets", json={**TOKENS, "scope": "project", "project_id": project}),
        "unknown_project",
        404,
    )
    assert budgets_of(client_a) == []


def test_a_money_budget_names_the_models_without_a_price(client_a):
    endpoint_id = add_endpoint(client_a)
    for model in ("gpt-x", "claude-y"):
        chat = client_a.post("/api/session", json={"endpoint_id": endpoint_id, "model": model})
        assert chat.status_code == 201, chat.get_json()
    money = {**TOKENS, "unit": "money", "scope": "endpoint", "endpoint_id": endpoint_id}
    message = refused(client_a.post("/api/budgets", json=money), "budget_unpriced")
    assert "claude-y, gpt-x" in message
    client_a.post(
        "/api/usage/prices", json={"model": "gpt-x", "input_per_mtok": 1, "output_per_mtok": 2}
    )
    message = refused(client_a.post("/api/budgets", json=money), "budget_unpriced")
    assert "claude-y" in message and "gpt-x" not in message
    client_a.post(
        "/api/usage/prices", json={"model": "claude-y", "input_per_mtok": 3, "output_per_mtok": 4}
    )
    created = client_a.post("/api/budgets", json={**money, "timezone": "Europe/Berlin"})
    assert created.status_code == 201, created.get_json()
    budget = created.get_json()
    assert budget["description"] == "this month's budget for OpenRouter"
    assert (
        budget["state"] == "ok" and budget["percent"] == 0 and budget["timezone"] == "Europe/Berlin"
    )
    # A month in Berlin starts at 23:00 or 22:00 UTC the day before.
    assert budget["resets_at"].endswith(("T23:00:00Z", "T22:00:00Z"))


def test_each_user_sees_and_changes_only_their_own_budgets(client_a, client_b):
    mine = client_a.post("/api/budgets", json=TOKENS).get_json()
    assert budgets_of(client_b) == []
    assert client_b.patch(f"/api/budgets/{mine['id']}", json={"hard_cap": 5}).status_code == 404
    assert client_b.delete(f"/api/budgets/{mine['id']}").status_code == 404
    changed = client_a.patch(
        f"/api/budgets/{mine['id']}", json={"period": "week", "hard_cap": 2000}
    )
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["description"] == "this week's budget for your account"
    assert client_a.delete(f"/api/budgets/{mine['id']}").status_code == 200
    assert budgets_of(client_a) == []


def test_an_admin_sets_a_users_budget_which_only_an_admin_changes(
    admin_client, client_a, client_b, users
):
    a = users["a"].id
    refused(client_b.post("/api/budgets", json={**TOKENS, "user_id": a}), "admin_only", 403)
    set_for_a = admin_client.post("/api/budgets", json={**TOKENS, "user_id": a})
    assert set_for_a.status_code == 201, set_for_a.get_json()
    budget = set_for_a.get_json()
    assert budget["user_id"] == a and budget["set_by_admin"] is True
    assert [b["id"] for b in budgets_of(client_a)] == [budget["id"]]  # a is held to it
    refused(
        client_a.patch(f"/api/budgets/{budget['id']}", json={"hard_cap": 1e9}), "admin_only", 403
    )
    refused(client_a.delete(f"/api/budgets/{budget['id']}"), "admin_only", 403)
    listed = admin_client.get(f"/api/budgets?user_id={a}").get_json()["budgets"]
    assert [b["hard_cap"] for b in listed] == [1000]
    assert admin_client.delete(f"/api/budgets/{budget['id']}").status_code == 200
    assert budgets_of(client_a) == []


HX = {"HX-Request": "true"}
FORM = {
    "applies_to": "user",
    "budget_period": "month",
    "unit": "tokens",
    "soft_cap": "800",
    "hard_cap": "1000",
    "timezone": "Europe/Berlin",
}


def test_the_usage_pages_forms_add_edit_and_delete_a_budget(client_a):
    endpoint_id = add_endpoint(client_a)
    added = client_a.post(
        "/usage/budgets", data={**FORM, "applies_to": f"endpoint:{endpoint_id}"}, headers=HX
    )
    assert added.status_code == 200
    html = added.get_data(as_text=True)
    assert html.lstrip().startswith('<section class="usage-budgets" id="usage-budgets"')
    assert "This month&#39;s budget for OpenRouter" in html
    [budget] = budgets_of(client_a)
    assert (budget["scope"], budget["endpoint_id"], budget["timezone"]) == (
        "endpoint",
        endpoint_id,
        "Europe/Berlin",
    )
    assert budget["history"][0]["current"] and budget["history"][0]["spent"] == 0

    edited = client_a.post(
        f"/usage/budgets/{budget['id']}",
        data={**FORM, "budget_period": "week", "soft_cap": "", "hard_cap": "50"},
        headers=HX,
    )
    assert edited.status_code == 200
    [budget] = budgets_of(client_a)
    assert (budget["scope"], budget["period"], budget["soft_cap"], budget["hard_cap"]) == (
        "user",
        "week",
        None,
        50,
    )
    assert budget["history"][0]["label"].startswith("Week of ")

    deleted = client_a.post(f"/usage/budgets/{budget['id']}/delete", headers=HX)
    assert deleted.status_code == 200 and "No budgets yet." in deleted.get_data(as_text=True)
    assert budgets_of(client_a) == []
    # Without HTMX a form goes back to the page.
    plain = client_a.post("/usage/budgets", data=FORM)
    assert plain.status_code == 303 and plain.headers["Location"].endswith("/usage")


def test_a_refused_form_shows_its_error_in_the_form_and_changes_nothing(client_a, client_b):
    kept = client_a.post("/api/budgets", json=TOKENS).get_json()
    before = budgets_of(client_a)
    foreign = add_endpoint(client_b, "Theirs")
    for change, code in [
        ({"soft_cap": "1200"}, "invalid_budget_cap"),
        ({"hard_cap": "0", "soft_cap": ""}, "invalid_budget_cap"),
        ({"hard_cap": "-3"}, "invalid_budget_cap"),
        ({"timezone": "Europe/Atlantis"}, "invalid_timezone"),
        ({"applies_to": f"endpoint:{foreign}"}, "unknown_endpoint"),
        ({"applies_to": "project:nope"}, "unknown_project"),
    ]:
        for url, where in [
            ("/usage/budgets", 'id="budget-add-form"'),
            (f"/usage/budgets/{kept['id']}", f'action="/usage/budgets/{kept["id"]}"'),
        ]:
            answer = client_a.post(url, data={**FORM, **change}, headers=HX)
            assert answer.status_code in (400, 404), (change, answer.status_code)
            html = answer.get_data(as_text=True)
            form = html[html.index(where) :]
            form = form[: form.index("</form>")]
            assert f'data-code="{code}"' in form, (change, url)
            for name, value in change.items():
                if value and name != "applies_to":  # a select offers only the user's own
                    assert f'value="{value}"' in form  # what was typed is kept
    assert budgets_of(client_a) == before
    # Without scripts, the whole page comes back with the error in its form.
    page = client_a.post("/usage/budgets", data={**FORM, "soft_cap": "1200"})
    assert page.status_code == 400 and "<h1>Usage</h1>" in page.get_data(as_text=True)
    assert 'data-code="invalid_budget_cap"' in page.get_data(as_text=True)
