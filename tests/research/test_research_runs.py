"""Research runs on the turn engine, in-process: the scripted provider through the real
OpenAI SDK, the real web tools against a local search and page server. A run plans, searches,
reads with bounded parallelism, and writes a cited report; its progress rides on events a
snapshot keeps whole; the budget ends it with a report; bad input is refused before
anything is saved. On each backend (SQLite, and PostgreSQL with NUMI_TEST_DATABASE_URL)."""

from __future__ import annotations

from research_support import answer, of_type, run_row
from sqlalchemy import select

from numi.extensions import db
from numi.models import Message, ResearchRun
from numi.testing import Scenario
from numi.turns.channel import TurnState

PLAN = "1. otters sleep\n2. otters rafts"


def test_a_run_plans_searches_reads_and_writes_a_cited_report(
    research_app, research_client, research_chat, run_research, research_web, scripted
):
    price = {"model": "fake-model", "input_per_mtok": 1000, "output_per_mtok": 2000}
    assert research_client.post("/api/usage/prices", json=price).status_code == 200
    # One page seen already, one not text, one missing, one at a private address.
    private = "http://10.255.255.1/admin"
    research_web.results["otters rafts"] = ["otters-1", "image-1", "gone-1", private]
    scripted.enqueue(Scenario().text(PLAN).usage(30, 10))
    scripted.enqueue(Scenario().text("Otters hold hands [1] and raft [2].").usage(400, 20))
    events = run_research(research_chat)
    assert research_web.searches == ["otters sleep", "otters rafts"]
    # Every page once; the one both searches found is read once.
    assert dict(research_web.fetches) == {"otters-1": 1, "otters-2": 1, "image-1": 1, "gone-1": 1}
    [plan] = of_type(events, "research_plan")
    assert plan["data"]["questions"] == ["otters sleep", "otters rafts"]
    sources = of_type(events, "research_source")
    assert len(sources) == 5
    progress = of_type(events, "research_step")[-1]["data"]["progress"]
    read = [s for s in progress["sources"] if s["status"] == "read"]
    skipped = [s for s in progress["sources"] if s["status"] == "skipped"]
    assert [s["n"] for s in read] == [1, 2] and len(skipped) == 3
    reasons = {s["url"].rsplit("/", 1)[-1]: s["reason"] for s in skipped}
    assert "not a text page" in reasons["image-1"] and "404" in reasons["gone-1"]
    assert "Refused" in reasons["admin"] and "10.255.255.1" in reasons["admin"]
    assert all(s["read_at"] for s in read)
    assert progress["tokens"] == 460 and progress["pages_read"] == 2
    assert progress["cost"] == (30 + 400) / 1000 + (10 + 20) / 500  # the user's prices
    assert progress["phase"] == "done"
    assert of_type(events, "done") and not of_type(events, "error")
    # The report streamed as the answer, and is saved with its sources numbered.
    [report] = answer(research_app, research_chat)
    assert report.content == "Otters hold hands [1] and raft [2]."
    cited = report.citation_sources
    assert [(c["n"], c["url"].rsplit("/", 1)[-1]) for c in cited] == [
        (1, "otters-1"),
        (2, "otters-2"),
    ]
    assert report.meta["research"]["pages_read"] == 2
    # The report's request carried the pages' capped text as plain text.
    request = scripted.requests[-1].body["messages"][-1]["content"]
    assert "[1] Page otters-1 <b>bold</b>" in request and "Facts about otters-2" in request
    run, rows = run_row(research_app, research_chat)
    assert run.status == "done" and run.steps == 8  # plan, 2 searches, 5 pages
    assert all(
        len(row.text or "") <= research_app.config["NUMI_RESEARCH_PAGE_CHARS"] for row in rows
    )


def test_the_budget_ends_the_gathering_and_the_report_is_written(
    research_app, research_chat, run_research, research_web, scripted
):
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Short report [1]."))
    events = run_research(research_chat, research={"max_pages": 1})
    assert sum(research_web.fetches.values()) == 1
    steps = of_type(events, "research_step")
    assert any(e["data"]["kind"] == "budget" and "1 pages" in e["data"]["text"] for e in steps)
    assert answer(research_app, research_chat)[0].content == "Short report [1]."
    run, _ = run_row(research_app, research_chat)
    assert run.budget["max_pages"] == 1 and run.status == "done"


def test_the_progress_view_is_folded_whole_into_the_turns_snapshot(
    research_chat, run_research, scripted
):
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Report [1]."))
    events = run_research(research_chat)
    state = TurnState(turn_id=events[0]["turn_id"])
    for event in events:
        state.apply(event["type"], event["data"])
    research = state.snapshot()["research"]
    assert research == of_type(events, "research_step")[-1]["data"]["progress"]
    assert TurnState.restore(state.snapshot()).snapshot()["research"] == research


def send_research(client, chat_id, **fields):
    body = {"session": chat_id, "message": "Research this", "mode": "research", **fields}
    return client.post("/api/chat_stream", json=body)


def test_bad_research_sends_are_refused_with_a_code_and_change_nothing(
    research_app, research_client, research_chat
):
    for fields, code in [
        ({"mode": "deep"}, "invalid_mode"),
        ({"research": {"max_steps": 0}}, "research_budget_invalid"),
        ({"research": {"max_pages": "many"}}, "research_budget_invalid"),
        ({"research": {"max_pages": True}}, "research_budget_invalid"),
        ({"research": {"colour": 1}}, "research_budget_invalid"),
        ({"research": [1, 2]}, "research_budget_invalid"),
        ({"research": {"max_tokens": 2_000_001}}, "research_budget_over_limit"),
        ({"research": {"time_limit_seconds": 3601}}, "research_budget_over_limit"),
        (
            {"compare": [{"endpoint_id": 1, "model": "a"}, {"endpoint_id": 1, "model": "b"}]},
            "research_unsupported",
        ),
    ]:
        response = send_research(research_client, research_chat, **fields)
        assert response.status_code == 400, fields
        assert response.get_json()["error"]["code"] == code, fields
    with research_app.app_context():
        assert (
            db.session.execute(select(Message).where(Message.chat_id == research_chat)).first()
            is None
        )
        assert db.session.execute(select(ResearchRun)).first() is None


def test_research_on_a_model_without_tool_calling_is_refused_before_it_starts(
    research_app, research_client, research_chat, run_research, scripted
):
    endpoint = research_client.get("/api/endpoints").get_json()["endpoints"][0]
    response = research_client.patch(
        f"/api/endpoints/{endpoint['id']}",
        json={"model_capabilities": {"fake-model": {"tools": False}}},
    )
    assert response.status_code == 200, response.get_json()
    events = run_research(research_chat)
    [error] = of_type(events, "error")
    assert error["data"]["code"] == "research_needs_tools"
    assert "fake-model" in error["data"]["message"]
    assert scripted.requests == []  # nothing left for the model
    with research_app.app_context():
        assert (
            db.session.execute(select(Message).where(Message.chat_id == research_chat)).first()
            is None
        )


def test_an_ambiguous_request_gets_one_clarifying_question_and_the_reply_starts_the_run(
    research_app, research_chat, run_research, research_web, scripted
):
    scripted.enqueue(Scenario().text("CLARIFY: Sea otters or river otters?"))
    events = run_research(research_chat, "Tell me about otters")
    assert "CLARIFY" in scripted.requests[-1].body["messages"][-1]["content"]
    assert of_type(events, "done") and research_web.searches == []
    assert of_type(events, "research_step")[-1]["data"]["kind"] == "clarify"
    [question] = answer(research_app, research_chat)
    assert question.content == "Sea otters or river otters?"

    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Sea otters hold hands [1]."))
    run_research(research_chat, "Sea otters, please")
    plan_prompt = scripted.requests[-2].body["messages"][-1]["content"]
    assert "CLARIFY" not in plan_prompt  # one question per request, never a second
    assert "assistant: Sea otters or river otters?" in plan_prompt
    assert "Request: Sea otters, please" in plan_prompt
    assert answer(research_app, research_chat)[-1].content == "Sea otters hold hands [1]."
    with research_app.app_context():
        statuses = db.session.execute(select(ResearchRun.status).order_by(ResearchRun.id))
        assert list(statuses.scalars()) == ["asked", "done"]
