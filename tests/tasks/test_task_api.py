"""The tasks API (numi/web/tasks.py, numi/tasks/store.py): each bad input gets its stable
code and changes nothing; multi-user mode shows each user only their own tasks, and the
admin's limit per user holds. In-process, on each backend."""

from __future__ import annotations

GOOD = {
    "prompt": "What changed in the repo?",
    "schedule": "every weekday at 8:00",
    "timezone": "Europe/Berlin",
}


def add_endpoint(client, name="ep") -> int:
    base_url = "https://llm.example.com/v1"  # never called: the tests here run no task
    response = client.post(
        "/api/endpoints",
        json={
            "name": name,
            "kind": "openai_chat",
            "base_url": base_url,
            "api_key": "k",
            "default_model": "m",
        },
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def tasks_of(client) -> list[dict]:
    return client.get("/api/tasks").get_json()["tasks"]


BAD = [
    ({"schedule": "every fortnight"}, "invalid_schedule"),
    ({"schedule": "0 0 31 2 *"}, "invalid_schedule"),
    ({"timezone": "Europe/Atlantis"}, "invalid_timezone"),
    ({"schedule": "every minute"}, "schedule_too_frequent"),
    ({"schedule": "*/2 * * * *"}, "schedule_too_frequent"),
    ({"webhook_url": "http://127.0.0.1:9/hook"}, "webhook_refused"),
    ({"webhook_url": "http://10.1.2.3/hook"}, "webhook_refused"),
    ({"webhook_url": "ftp://example.com/x"}, "invalid_webhook"),
    ({"endpoint_id": 999999}, "task_route_gone"),
    ({"prompt": "  "}, "empty_message"),
    ({"destination": "elsewhere"}, "invalid_input"),
    ({"colour": "blue"}, "unknown_field"),
]


def test_bad_input_is_refused_with_its_code_and_changes_nothing(client_a):
    endpoint_id = add_endpoint(client_a)
    kept = client_a.post("/api/tasks", json={**GOOD, "endpoint_id": endpoint_id})
    assert kept.status_code == 201
    before = tasks_of(client_a)
    for change, code in BAD:
        refused = client_a.post("/api/tasks", json={**GOOD, "endpoint_id": endpoint_id, **change})
        assert refused.status_code in (400, 409), (change, refused.get_json())
        assert refused.get_json()["error"]["code"] == code, change
        patched = client_a.patch(f"/api/tasks/{kept.get_json()['id']}", json=change)
        assert patched.get_json()["error"]["code"] == code, change
        assert tasks_of(client_a) == before, change


def test_each_user_sees_and_changes_only_their_own_tasks(client_a, client_b):
    mine = client_a.post(
        "/api/tasks", json={**GOOD, "endpoint_id": add_endpoint(client_a)}
    ).get_json()
    assert tasks_of(client_b) == []
    task_id = mine["id"]
    for response in (
        client_b.get(f"/api/tasks/{task_id}"),
        client_b.patch(f"/api/tasks/{task_id}", json={"paused": True}),
        client_b.post(f"/api/tasks/{task_id}/run"),
        client_b.get(f"/api/tasks/{task_id}/runs"),
        client_b.delete(f"/api/tasks/{task_id}"),
    ):
        assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found"
    for path in ("", "/run", "/pause", "/resume", "/delete"):  # the page's forms
        assert client_b.post(f"/tasks/{task_id}{path}", data={"name": "x"}).status_code == 404
    assert client_b.get(f"/tasks/{task_id}/item").status_code == 404
    # Nor another user's endpoint as a route.
    theirs = client_b.post(
        "/api/tasks", json={**GOOD, "endpoint_id": add_endpoint(client_a, "a's")}
    )
    assert theirs.get_json()["error"]["code"] == "task_route_gone"
    assert "What changed" not in client_b.get("/tasks").get_data(as_text=True)
    assert [t["id"] for t in tasks_of(client_a)] == [task_id]


def test_pause_resume_edit_and_delete(client_a):
    task = client_a.post(
        "/api/tasks", json={**GOOD, "endpoint_id": add_endpoint(client_a)}
    ).get_json()
    assert task["next_run_at"] and task["cron"] == "0 8 * * 1-5" and task["name"] == GOOD["prompt"]
    paused = client_a.patch(f"/api/tasks/{task['id']}", json={"paused": True}).get_json()
    assert paused["paused"] and paused["next_run_at"] is None
    resumed = client_a.patch(
        f"/api/tasks/{task['id']}",
        json={"paused": False, "schedule": "0 9 * * 1", "name": "Weekly"},
    ).get_json()
    assert not resumed["paused"] and resumed["cron"] == "0 9 * * 1" and resumed["name"] == "Weekly"
    assert client_a.delete(f"/api/tasks/{task['id']}").status_code == 204
    assert tasks_of(client_a) == []


def test_the_limit_per_user(make_app):
    from fixtures.users import create_user, sign_in

    app = make_app(NUMI_AUTH="multi", NUMI_TASKS_PER_USER=2)
    client = app.test_client()
    sign_in(client, create_user(app, "carol"))
    endpoint_id = add_endpoint(client)
    for _ in range(2):
        assert (
            client.post("/api/tasks", json={**GOOD, "endpoint_id": endpoint_id}).status_code == 201
        )
    refused = client.post("/api/tasks", json={**GOOD, "endpoint_id": endpoint_id})
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "too_many_tasks"
    assert len(tasks_of(client)) == 2
