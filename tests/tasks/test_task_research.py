"""A scheduled task whose tools include "research" runs each time as a research run (issue
38): the plan, the searches and pages of a local search and page server, and the cited
report as the run's result. In-process under the injected clock, on each backend."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from numi.extensions import db
from numi.models import ResearchRun
from numi.testing import Scenario
from research_support import ResearchWeb, search_locally


def test_a_research_task_writes_a_cited_report_as_its_result(
    app, client, scripted, endpoint_id, clock, ticked
):
    web = ResearchWeb()
    try:
        search_locally(app, web.url)
        body = {
            "prompt": "What is new about otters?",
            "schedule": "every day at 8:00",
            "timezone": "Europe/Berlin",
            "endpoint_id": endpoint_id,
            "model": "fake-model",
            "tools": ["research"],
        }
        task = client.post("/api/tasks", json=body).get_json()
        scripted.enqueue(Scenario().text("1. otters news"))
        scripted.enqueue(Scenario().text("Otters are in the news [1]."))
        clock.now += timedelta(hours=1)
        assert len(ticked()) == 1
    finally:
        web.close()
    [run] = client.get(f"/api/tasks/{task['id']}/runs").get_json()["runs"]
    assert run["status"] == "done", run
    messages = client.get(f"/api/history/{run['chat_id']}").get_json()["messages"]
    report = [m for m in messages if m["role"] == "assistant"][-1]
    assert report["content"] == "Otters are in the news [1]."
    assert web.searches == ["otters news"] and web.fetches["otters-1"] == 1
    with app.app_context():
        assert db.session.execute(select(ResearchRun.status)).scalars().all() == ["done"]
