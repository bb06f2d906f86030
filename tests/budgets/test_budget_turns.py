"""Budgets hold against real turns (the scripted provider through the real OpenAI SDK): a
hard cap refuses the send before anything leaves, naming the budget and when it resets; a
fallback chain skips a route whose endpoint budget is spent and says so; and 20 turns
started at once against a nearly spent budget overshoot it by at most one turn. In-process,
on each backend (SQLite, and PostgreSQL with NUMI_TEST_DATABASE_URL)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import gevent
import pytest
from sqlalchemy import func, select, update

from fixtures.provider import add_scripted_endpoint

from numi.agent.send import Send
from numi.agent.sending import start_turn
from numi.chat.budget_ledger import period_bounds
from numi.extensions import db, turn_manager
from numi.models import Budget, Message
from numi.testing import Scenario

OUTPUT_ALLOWANCE = 1000
ANSWER_USAGE = (10, 1000)  # what each scripted answer reports: about one estimate


@pytest.fixture
def app(make_app):
    # Titles are model calls of their own: they would take the scripted answers.
    return make_app(
        NUMI_GENERATE_TITLES=False,
        NUMI_PROVIDER_MAX_RETRIES=0,
        NUMI_BUDGET_OUTPUT_TOKENS=OUTPUT_ALLOWANCE,
    )


def new_chat(client, endpoint_id: int, model: str = "fake-model") -> str:
    response = client.post("/api/session", json={"endpoint_id": endpoint_id, "model": model})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def add_budget(client, **fields) -> dict:
    body = {"scope": "user", "period": "month", "unit": "tokens", "hard_cap": 4500, **fields}
    response = client.post("/api/budgets", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def spend(app, budget_id: int, amount: float) -> None:
    """What earlier turns of this period settled (set directly: the starting point)."""
    with app.app_context():
        db.session.execute(update(Budget).where(Budget.id == budget_id).values(spent=amount))
        db.session.commit()


def run_turns(app, chat_ids: list[str], **payload) -> dict[str, list[dict]]:
    """Start one turn per chat at once, wait for all to end: each chat's events."""
    with app.app_context():
        subscriptions = {chat_id: turn_manager().subscribe(chat_id)[0] for chat_id in chat_ids}
        for n, chat_id in enumerate(chat_ids):
            send = Send.from_payload({"message": f"Question {n}", **payload}, app.config)
            start_turn(1, True, chat_id, send)
        deadline = time.monotonic() + 15
        while any(turn_manager().is_running(chat_id) for chat_id in chat_ids):
            assert time.monotonic() < deadline, "a turn did not end"
            gevent.sleep(0.01)
        events = {}
        for chat_id, subscription in subscriptions.items():
            events[chat_id] = []
            while not subscription.queue.empty():
                events[chat_id].append(subscription.queue.get_nowait())
        db.session.remove()
    return events


def answers(app, chat_ids: list[str]) -> int:
    with app.app_context():
        return db.session.execute(
            select(func.count(Message.id)).where(
                Message.chat_id.in_(chat_ids), Message.role == "assistant"
            )
        ).scalar_one()


def errors_of(events: list[dict]) -> list[dict]:
    return [e["data"] for e in events if e["type"] == "error"]


def test_twenty_turns_at_once_overshoot_a_nearly_spent_budget_by_at_most_one_turn(
    app, client, scripted
):
    endpoint_id = add_scripted_endpoint(client, scripted, "OpenRouter")
    budget = add_budget(client, hard_cap=4500)
    spend(app, budget["id"], 3000)  # room for about one and a half turns
    chats = [new_chat(client, endpoint_id) for _ in range(20)]
    scripted.enqueue(*[Scenario().text("An answer.").usage(*ANSWER_USAGE) for _ in range(20)])

    events = run_turns(app, chats)

    answered = answers(app, chats)
    # Each turn reserved its estimate before its request left, so the turns that started
    # together saw each other: two fit under the cap, not all twenty.
    assert 1 <= answered <= 2, answered
    assert len(scripted.requests) == answered
    [state] = client.get("/api/budgets").get_json()["budgets"]
    assert state["reserved"] == 0  # every turn settled
    assert state["spent"] == 3000 + answered * sum(ANSWER_USAGE)
    assert state["spent"] - 4500 <= sum(ANSWER_USAGE)  # at most one turn over the cap
    assert state["state"] == "exceeded"
    refused = [errors_of(e) for e in events.values() if errors_of(e)]
    assert len(refused) == 20 - answered
    for [error] in refused:
        assert error["code"] == "budget_exceeded"
        assert "this month's budget for your account" in error["message"]
        assert f"resets at {state['resets_at'][:16]}" in error["message"]


def test_a_spent_hard_cap_refuses_before_anything_leaves_and_saves_nothing(app, client, scripted):
    endpoint_id = add_scripted_endpoint(client, scripted, "OpenRouter")
    budget = add_budget(client, scope="endpoint", endpoint_id=endpoint_id, hard_cap=100)
    spend(app, budget["id"], 100)
    chat = new_chat(client, endpoint_id)

    [error] = errors_of(run_turns(app, [chat])[chat])

    assert error["code"] == "budget_exceeded"
    assert "this month's budget for OpenRouter" in error["message"]
    assert scripted.requests == []  # nothing left the machine
    assert client.get(f"/api/history/{chat}").get_json()["messages"] == []


def test_a_fallback_chain_skips_a_route_whose_budget_is_spent(app, client, scripted):
    spent_endpoint = add_scripted_endpoint(client, scripted, "OpenRouter")
    other = add_scripted_endpoint(client, scripted, "Local")
    budget = add_budget(client, scope="endpoint", endpoint_id=spent_endpoint, hard_cap=100)
    spend(app, budget["id"], 150)
    chat = new_chat(client, spent_endpoint)
    patched = client.patch(
        f"/api/session/{chat}",
        json={"settings": {"fallbacks": [{"endpoint_id": other, "model": "fake-model-2"}]}},
    )
    assert patched.status_code == 200, patched.get_json()
    scripted.enqueue(Scenario().text("From the fallback.").usage(*ANSWER_USAGE))

    events = run_turns(app, [chat])[chat]

    assert errors_of(events) == []
    [route] = [e["data"] for e in events if e["type"] == "model_route"]
    assert route["reason"] == "budget_exceeded" and route["model"] == "fake-model-2"
    assert "skipped" in route["notice"] and "OpenRouter" in route["notice"]
    assert [r.model for r in scripted.requests] == ["fake-model-2"]
    [state] = client.get("/api/budgets").get_json()["budgets"]
    assert state["spent"] == 150  # the fallback's endpoint has no budget: nothing counted here


def test_past_the_soft_cap_the_composer_the_panel_and_usage_say_so(app, client, scripted):
    endpoint_id = add_scripted_endpoint(client, scripted, "OpenRouter")
    budget = add_budget(
        client, scope="endpoint", endpoint_id=endpoint_id, soft_cap=4000, hard_cap=5000
    )
    chat = new_chat(client, endpoint_id)
    line = "83 % of this month&#39;s budget for OpenRouter"
    assert "budget-warnings" not in client.get(f"/c/{chat}/context_gauge").get_data(as_text=True)
    spend(app, budget["id"], 4150)

    gauge = client.get(f"/c/{chat}/context_gauge").get_data(as_text=True)
    panel = client.get(f"/c/{chat}/context_panel").get_data(as_text=True)
    usage = client.get("/usage").get_data(as_text=True)

    assert 'id="budget-warnings-composer"' in gauge and line in gauge
    assert 'id="budget-warnings-panel"' in panel and line in panel
    assert 'data-state="warning"' in usage and "This month&#39;s budget for OpenRouter" in usage
    assert "Past the soft cap" in usage


def test_a_compare_turn_reserves_every_lane_and_counts_each_on_its_own_endpoint(
    app, client, scripted
):
    first, second = (
        add_scripted_endpoint(client, scripted, name) for name in ("OpenRouter", "Local")
    )
    account = add_budget(client, hard_cap=100_000)
    local = add_budget(client, scope="endpoint", endpoint_id=second, hard_cap=100_000)
    chat = new_chat(client, first)
    lanes = [{"endpoint_id": first, "model": "fake-model"}, {"endpoint_id": second, "model": "m2"}]
    scripted.enqueue(Scenario().text("One.").usage(10, 100), model="fake-model")
    scripted.enqueue(Scenario().text("Two.").usage(20, 200), model="m2")

    events = run_turns(app, [chat], compare=lanes)[chat]

    assert errors_of(events) == []
    spent = {b["id"]: b["spent"] for b in client.get("/api/budgets").get_json()["budgets"]}
    assert spent == {account["id"]: 330, local["id"]: 220}  # each lane on its own endpoint

    spend(app, local["id"], 100_000)  # one lane's endpoint is spent: the whole turn waits
    events = run_turns(app, [chat], compare=lanes)[chat]
    [error] = errors_of(events)
    assert error["code"] == "budget_exceeded" and "budget for Local" in error["message"]
    assert len(scripted.requests) == 2  # only the first turn's lanes left the machine


def test_a_budgets_history_keeps_each_period_with_its_refusals_and_reroutes(app, client, scripted):
    spent_endpoint = add_scripted_endpoint(client, scripted, "OpenRouter")
    other = add_scripted_endpoint(client, scripted, "Local")
    budget = add_budget(client, scope="endpoint", endpoint_id=spent_endpoint, hard_cap=100)
    with app.app_context():
        now = datetime.fromisoformat(budget["period_start"].rstrip("Z"))
        last_month, _ = period_bounds("month", budget["timezone"], now - timedelta(days=1))
        db.session.execute(
            update(Budget)
            .where(Budget.id == budget["id"])
            .values(period_start=last_month, spent=77.0)
        )
        db.session.commit()
    plain = new_chat(client, spent_endpoint)
    scripted.enqueue(Scenario().text("A new month.").usage(10, 20))
    assert errors_of(run_turns(app, [plain])[plain]) == []  # the new period has room

    spend(app, budget["id"], 150)
    chained = new_chat(client, spent_endpoint)
    client.patch(
        f"/api/session/{chained}",
        json={"settings": {"fallbacks": [{"endpoint_id": other, "model": "fake-model-2"}]}},
    )
    scripted.enqueue(Scenario().text("From the fallback.").usage(*ANSWER_USAGE))
    assert errors_of(run_turns(app, [chained])[chained]) == []  # moved to Local
    [error] = errors_of(run_turns(app, [plain])[plain])  # refused: no other route
    assert error["code"] == "budget_exceeded"

    [state] = client.get("/api/budgets").get_json()["budgets"]
    current, ended = state["history"]
    assert current["current"] and not ended["current"]
    assert (current["spent"], current["refused"], current["rerouted"]) == (150, 1, 1)
    assert (ended["spent"], ended["refused"], ended["rerouted"]) == (77, 0, 0)
    assert ended["period_start"] == last_month.isoformat() + "Z"
    page = client.get("/usage").get_data(as_text=True)
    assert ended["label"] in page and f"{current['label']} (now)" in page
