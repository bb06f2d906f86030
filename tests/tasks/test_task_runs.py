"""Scheduled tasks run through the turn engine under an injectable clock (no sleeps): a due
time runs once, a missed stretch runs once and says it was late, a failed run is recorded
with its reason and the next one still runs, a task whose route is gone is paused with the
reason, Run now, one chat for every run, and the webhook. In-process, on each backend."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

from numi.testing import Scenario


def create(client, **fields):
    body = {
        "prompt": "Summarise the news.",
        "schedule": "every day at 8:00",
        "timezone": "Europe/Berlin",
    }
    body.update(fields)
    response = client.post("/api/tasks", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def runs_of(client, task_id):
    response = client.get(f"/api/tasks/{task_id}/runs")
    assert response.status_code == 200
    return response.get_json()["runs"]


def answer_of(client, chat_id):
    messages = client.get(f"/api/history/{chat_id}").get_json()["messages"]
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_a_due_task_runs_once_and_its_answer_is_in_a_new_chat(
    client, scripted, endpoint_id, clock, ticked
):
    task = create(client, endpoint_id=endpoint_id, model="fake-model", name="Morning news")
    assert task["next_run_at"] == "2026-03-02T07:00:00Z"  # 08:00 in Berlin
    assert ticked() == []  # 07:00 Berlin: not due yet
    scripted.enqueue(Scenario().text("Here is the news.").usage(12, 5))
    clock.now += timedelta(hours=1)
    assert len(ticked()) == 1
    assert ticked() == []  # the same due time never runs twice
    [run] = runs_of(client, task["id"])
    assert run["status"] == "done" and run["late_seconds"] == 0 and run["trigger"] == "schedule"
    assert (run["input_tokens"], run["output_tokens"]) == (12, 5)
    assert answer_of(client, run["chat_id"]) == ["Here is the news."]
    listed = client.get("/api/tasks").get_json()["tasks"][0]
    assert listed["next_run_at"] == "2026-03-03T07:00:00Z"
    assert listed["last_run"]["chat_id"] == run["chat_id"]


def test_after_downtime_a_missed_run_happens_once_and_says_it_was_late(
    client, scripted, endpoint_id, clock, ticked
):
    task = create(client, endpoint_id=endpoint_id)
    scripted.enqueue(Scenario().text("Caught up."))
    clock.now += timedelta(days=3, hours=2)  # three due times passed while the server was down
    assert len(ticked()) == 1
    [run] = runs_of(client, task["id"])
    assert run["due_at"] == "2026-03-02T07:00:00Z"
    assert run["late_seconds"] == 3 * 86400 + 3600
    assert client.get("/api/tasks").get_json()["tasks"][0]["next_run_at"] == "2026-03-06T07:00:00Z"
    page = client.get("/tasks").get_data(as_text=True)
    assert "ran 4380 min late" in page and "Caught up." not in page  # the answer is in its chat
    chat = client.get(f"/c/{run['chat_id']}").get_data(as_text=True)
    assert "Scheduled task, ran 4380 min late" in chat and "Caught up." in chat


def test_a_failed_run_is_recorded_and_the_next_one_still_runs(
    client, scripted, endpoint_id, clock, ticked
):
    task = create(client, endpoint_id=endpoint_id)
    scripted.enqueue(Scenario.http_error(400, "bad_request", message="The model refused."))
    clock.now += timedelta(hours=1)
    ticked()
    [failed] = runs_of(client, task["id"])
    assert failed["status"] == "failed" and failed["error"]["code"]
    scripted.enqueue(Scenario().text("Better today."))
    clock.now += timedelta(days=1)
    ticked()
    newest, _ = runs_of(client, task["id"])
    assert newest["status"] == "done"
    assert answer_of(client, newest["chat_id"]) == ["Better today."]


def test_a_task_whose_route_is_gone_is_paused_with_the_reason(
    client, scripted, endpoint_id, clock, ticked
):
    task = create(client, endpoint_id=endpoint_id)
    assert client.delete(f"/api/endpoints/{endpoint_id}").status_code in (200, 204)
    clock.now += timedelta(hours=1)
    ticked()
    [run] = runs_of(client, task["id"])
    assert run["status"] == "failed" and run["error"]["code"] == "task_route_gone"
    shown = client.get(f"/api/tasks/{task['id']}").get_json()
    assert shown["paused"] and shown["paused_reason"]["code"] == "task_route_gone"
    assert shown["next_run_at"] is None
    clock.now += timedelta(days=1)
    assert ticked() == []  # paused: nothing more runs
    # Resuming needs a route that exists; the refusal changes nothing.
    refused = client.patch(f"/api/tasks/{task['id']}", json={"paused": False})
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "task_route_gone"
    assert client.get(f"/api/tasks/{task['id']}").get_json()["paused"] is True
    refused = client.post(f"/api/tasks/{task['id']}/run")  # Run now: refused, no run recorded
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "task_route_gone"
    assert len(runs_of(client, task["id"])) == 1


def test_run_now_and_one_chat_for_every_run(client, scripted, endpoint_id, clock, ticked, settled):
    task = create(client, endpoint_id=endpoint_id, destination="chat")
    scripted.enqueue(Scenario().text("First."), Scenario().text("Second."))
    started = client.post(f"/api/tasks/{task['id']}/run")
    assert started.status_code == 202 and started.get_json()["trigger"] == "manual"
    settled([started.get_json()["id"]])
    clock.now += timedelta(hours=1)
    ticked()
    manual, scheduled = reversed(runs_of(client, task["id"]))
    assert manual["trigger"] == "manual" and scheduled["trigger"] == "schedule"
    assert manual["chat_id"] == scheduled["chat_id"]  # appended to the task's one chat
    assert answer_of(client, manual["chat_id"]) == ["First.", "Second."]


class Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_webhook_gets_the_title_link_and_status(
    client, scripted, endpoint_id, clock, ticked, until
):
    # The single user is the admin, whom the address guard lets reach loopback.
    Hook.received.clear()
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        task = create(client, endpoint_id=endpoint_id, name="Digest", webhook_url=url)
        scripted.enqueue(Scenario().text("Digest ready."))
        clock.now += timedelta(hours=1)
        ticked()
        import gevent

        until(lambda: Hook.received or gevent.sleep(0.01), what="the webhook's POST")
    finally:
        server.shutdown()
    [run] = runs_of(client, task["id"])
    [payload] = Hook.received
    assert payload["status"] == "done" and payload["task"] == "Digest"
    assert payload["link"].endswith(f"/c/{run['chat_id']}#msg-{run['message_id']}")
    assert payload["link"].startswith("http://localhost/")


def test_schedule_this_from_a_chat_appends_each_run_to_it(client, scripted, endpoint_id, settled):
    chat_id = client.post(
        "/api/session", json={"endpoint_id": endpoint_id, "model": "fake-model"}
    ).get_json()["id"]
    scripted.enqueue(Scenario().text("Two new papers."))
    streamed = client.post(
        "/api/chat_stream", json={"session": chat_id, "message": "Any new papers on <b>RAG</b>?"}
    )
    assert streamed.status_code == 200 and "turn_end" in streamed.get_data(as_text=True)
    page = client.get(f"/tasks?chat={chat_id}").get_data(as_text=True)
    assert "Any new papers on &lt;b&gt;RAG&lt;/b&gt;?</textarea>" in page  # escaped, prefilled
    assert f'name="chat_id" value="{chat_id}"' in page
    created = client.post(
        "/tasks",
        data={
            "name": "Papers",
            "prompt": "Any new papers on <b>RAG</b>?",
            "schedule": "every Monday",
            "timezone": "Europe/Berlin",
            "route": f"{endpoint_id}:fake-model",
            "destination": "chat",
            "chat_id": chat_id,
            "webhook_url": "",
        },
    )
    assert created.status_code == 303
    [task] = client.get("/api/tasks").get_json()["tasks"]
    assert (task["destination"], task["chat_id"], task["cron"]) == ("chat", chat_id, "0 9 * * 1")
    scripted.enqueue(Scenario().text("One more paper."))
    settled([client.post(f"/api/tasks/{task['id']}/run").get_json()["id"]])
    assert answer_of(client, chat_id) == ["Two new papers.", "One more paper."]
    assert "Schedule this…" in client.get(f"/c/{chat_id}").get_data(as_text=True)


def test_the_scheduler_sleeps_until_the_next_due_time_and_ends_orphaned_runs(
    app, client, endpoint_id, clock, ticked
):
    from numi.extensions import db
    from numi.models import Task, TaskRun, utcnow
    from numi.services import services

    scheduler = services(app).task_scheduler
    task = create(client, endpoint_id=endpoint_id)  # due at 07:00 UTC; the clock says 06:00
    assert scheduler.seconds_to_next() == app.config["NUMI_TASK_POLL_SECONDS"]
    clock.now += timedelta(minutes=59, seconds=50)
    assert scheduler.seconds_to_next() == 10
    # A run whose process died before its turn saved anything (kill -9): recorded once its
    # chat runs no turn, as a failure that says so, not left "running" forever.
    with app.app_context():
        owner = db.session.get(Task, task["id"]).user_id
        orphan = TaskRun(
            task_id=task["id"], user_id=owner, due_at=utcnow(), request_id="task-run-orphan",
            status="running", started_at=utcnow() - timedelta(minutes=5),
        )  # fmt: skip
        db.session.add(orphan)
        db.session.commit()
    assert ticked() == []
    [run] = runs_of(client, task["id"])
    assert run["status"] == "failed" and run["error"]["code"] == "no_answer"
