"""A research budget in cost: `max_cost`, in the currency of the user's prices (the Usage
page's, per million tokens), enforced like the other limits; refused before anything is
saved when it is not a number above 0, above the administrator's limit, or on a model with
no price. The scripted provider through the real OpenAI SDK; on each backend."""

from __future__ import annotations

import pytest
from research_support import answer, of_type, run_row
from sqlalchemy import select

from numi.extensions import db
from numi.models import Message, ResearchRun
from numi.testing import Scenario

PLAN = "1. otters sleep\n2. otters rafts"


def price(client, input_per_mtok=1000, output_per_mtok=2000) -> None:
    body = {
        "model": "fake-model",
        "input_per_mtok": input_per_mtok,
        "output_per_mtok": output_per_mtok,
    }
    assert client.post("/api/usage/prices", json=body).status_code == 200


def test_the_cost_limit_ends_the_gathering_and_the_report_is_written(
    research_app, research_client, research_chat, run_research, research_web, scripted
):
    price(research_client)
    # The plan costs 40 / 1e6 * 1000 + 10 / 1e6 * 2000 = 0.06: over the limit.
    scripted.enqueue(Scenario().text(PLAN).usage(40, 10))
    scripted.enqueue(Scenario().text("What the plan knew.").usage(100, 10))
    events = run_research(research_chat, research={"max_cost": "0.05"})
    steps = [e["data"] for e in of_type(events, "research_step")]
    assert any(s["kind"] == "budget" and "cost 0.05" in s["text"] for s in steps)
    assert research_web.searches == [] and sum(research_web.fetches.values()) == 0
    assert answer(research_app, research_chat)[0].content == "What the plan knew."
    progress = steps[-1]["progress"]
    assert progress["budget"]["max_cost"] == 0.05 and progress["phase"] == "done"
    run, _ = run_row(research_app, research_chat)
    assert run.status == "done" and run.budget["max_cost"] == 0.05


def test_under_its_cost_limit_a_run_reads_as_usual(
    research_app, research_client, research_chat, run_research, research_web, scripted
):
    price(research_client)
    scripted.enqueue(Scenario().text(PLAN).usage(30, 10))
    scripted.enqueue(Scenario().text("Report [1].").usage(100, 10))
    events = run_research(research_chat, research={"max_cost": 0.06})
    assert research_web.searches == ["otters sleep", "otters rafts"]
    assert not any(e["data"]["kind"] == "budget" for e in of_type(events, "research_step"))


def test_a_cost_limit_on_a_model_without_a_price_is_refused_before_it_starts(
    research_app, research_chat, run_research, scripted
):
    events = run_research(research_chat, research={"max_cost": 1})
    [error] = of_type(events, "error")
    assert error["data"]["code"] == "research_cost_unpriced"
    assert "fake-model" in error["data"]["message"] and "Usage" in error["data"]["message"]
    assert scripted.requests == []
    with research_app.app_context():
        assert db.session.execute(select(Message)).first() is None
        assert db.session.execute(select(ResearchRun)).first() is None


@pytest.mark.parametrize(
    "fields,code",
    [
        ({"research": {"max_cost": 0}}, "research_budget_invalid"),
        ({"research": {"max_cost": -1}}, "research_budget_invalid"),
        ({"research": {"max_cost": "a lot"}}, "research_budget_invalid"),
        ({"research": {"max_cost": "nan"}}, "research_budget_invalid"),
        ({"research": {"max_cost": "inf"}}, "research_budget_invalid"),
        ({"research": {"max_cost": True}}, "research_budget_invalid"),
        ({"research_max_cost": "0"}, "research_budget_invalid"),  # the composer's form field
        ({"research": {"max_cost": 100.01}}, "research_budget_over_limit"),
    ],
)
def test_bad_cost_limits_are_refused_with_a_code_and_change_nothing(
    research_app, research_client, research_chat, fields, code
):
    price(research_client)
    body = {"session": research_chat, "message": "Research this", "mode": "research", **fields}
    response = research_client.post("/api/chat_stream", json=body)
    assert response.status_code == 400, fields
    assert response.get_json()["error"]["code"] == code
    with research_app.app_context():
        assert db.session.execute(select(Message)).first() is None
        assert db.session.execute(select(ResearchRun)).first() is None
