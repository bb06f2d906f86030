"""Usage: token sums per chat and per model over a period, summed in the database from the
answers' stored metrics, priced per model; owner-scoped; bad input is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from numi.extensions import db
from numi.models import Chat, Message, utcnow


def _answer(
    chat_id: str,
    model: str | None,
    tokens_in: int | None,
    tokens_out: int | None,
    *,
    days_ago: int = 0,
    via_metrics: bool = False,
    deleted: bool = False,
) -> None:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    meta = {"model": model, "metrics": usage} if via_metrics else {"model": model, "usage": usage}
    message = Message(
        chat_id=chat_id,
        role="assistant",
        content="answer",
        created_at=utcnow() - timedelta(days=days_ago),
    )
    message.meta = meta  # the same path a saved answer takes: columns filled from meta
    if deleted:
        message.deleted_at = utcnow()
    db.session.add(message)
    db.session.flush()


@pytest.fixture
def usage_data(multi_app, users):
    with multi_app.app_context():
        first = Chat(user_id=users["a"].id, title="Trip <plan>")
        second = Chat(user_id=users["a"].id, title="Code review")
        foreign = Chat(user_id=users["b"].id, title="Not yours")
        db.session.add_all([first, second, foreign])
        db.session.flush()
        db.session.add(Message(chat_id=first.id, role="user", content="question"))
        _answer(first.id, "gpt-x", 1000, 200)
        _answer(
            first.id, "gpt-x", 3000, 800, via_metrics=True, deleted=True
        )  # spent, though deleted
        _answer(first.id, "claude-y", 500, 100, days_ago=10)
        _answer(second.id, "gpt-x", 2_000_000, 1_000_000, days_ago=40)
        _answer(second.id, None, 7, 3)
        _answer(foreign.id, "gpt-x", 99_999, 99_999)
        db.session.commit()
        return {"first": first.id, "second": second.id, "foreign": foreign.id}


def test_usage_by_chat_and_model_over_periods(client_a, usage_data):
    today = client_a.get("/api/usage?period=today&group=chat").get_json()
    rows = {r["key"]: r for r in today["rows"]}
    assert set(rows) == {usage_data["first"], usage_data["second"]}  # never another user's chat
    assert (
        rows[usage_data["first"]]["input_tokens"],
        rows[usage_data["first"]]["output_tokens"],
    ) == (4000, 1000)
    assert (
        rows[usage_data["first"]]["answers"] == 2
        and rows[usage_data["first"]]["label"] == "Trip <plan>"
    )
    assert today["total"]["input_tokens"] == 4007 and today["total"]["cost"] is None

    month = client_a.get("/api/usage?period=30d&group=model").get_json()
    by_model = {r["label"]: (r["input_tokens"], r["output_tokens"]) for r in month["rows"]}
    assert by_model == {"gpt-x": (4000, 1000), "claude-y": (500, 100), "(unknown model)": (7, 3)}

    everything = client_a.get("/api/usage?period=all&group=model").get_json()
    assert {r["label"]: r["input_tokens"] for r in everything["rows"]}["gpt-x"] == 2_004_000
    assert everything["rows"][0]["label"] == "gpt-x"  # the largest first

    # From/to dates (inclusive UTC days).
    day = (utcnow() - timedelta(days=10)).date().isoformat()
    ranged = client_a.get(f"/api/usage?from={day}&to={day}&group=model").get_json()
    assert ranged["period"] == "custom" and [r["label"] for r in ranged["rows"]] == ["claude-y"]


def test_prices_turn_tokens_into_cost(client_a, usage_data):
    response = client_a.post(
        "/api/usage/prices", json={"model": "gpt-x", "input_per_mtok": 2.5, "output_per_mtok": "10"}
    )
    assert response.status_code == 200 and response.get_json()["price"] == {
        "model": "gpt-x",
        "input_per_mtok": 2.5,
        "output_per_mtok": 10.0,
    }
    report = client_a.get("/api/usage?period=all&group=model").get_json()
    cost = {r["label"]: r["cost"] for r in report["rows"]}
    assert cost["gpt-x"] == pytest.approx(2_004_000 / 1e6 * 2.5 + 1_001_000 / 1e6 * 10)
    assert cost["claude-y"] is None
    by_chat = {
        r["key"]: r["cost"] for r in client_a.get("/api/usage?period=all").get_json()["rows"]
    }
    assert by_chat[usage_data["second"]] == pytest.approx(2 * 2.5 + 1 * 10)
    assert client_a.get("/api/usage/prices").get_json()["prices"][0]["model"] == "gpt-x"
    # Both prices empty: removed.
    client_a.post(
        "/api/usage/prices", json={"model": "gpt-x", "input_per_mtok": "", "output_per_mtok": None}
    )
    assert client_a.get("/api/usage/prices").get_json()["prices"] == []


@pytest.mark.parametrize(
    "query, code",
    [
        ("period=yesterday", "invalid_period"),
        ("from=2026-13-01", "invalid_period"),
        ("from=2026-02-02&to=2026-02-01", "invalid_period"),
        ("group=user", "invalid_group"),
    ],
)
def test_bad_usage_queries(client_a, usage_data, query, code):
    response = client_a.get(f"/api/usage?{query}")
    assert response.status_code == 400 and response.get_json()["error"]["code"] == code


def test_bad_prices_change_nothing(client_a, usage_data):
    for body in (
        {"model": "", "input_per_mtok": 1},
        {"model": "m", "input_per_mtok": -1},
        {"model": "m", "input_per_mtok": "cheap"},
        {"model": "m", "output_per_mtok": True},
        {"model": "x" * 201, "input_per_mtok": 1},
    ):
        response = client_a.post("/api/usage/prices", json=body)
        assert response.status_code == 400, body
    assert client_a.get("/api/usage/prices").get_json()["prices"] == []


def test_usage_page_escapes_titles_and_filters_in_place(client_a, usage_data):
    page = client_a.get("/usage?period=all")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "Trip &lt;plan&gt;" in html and "Not yours" not in html
    assert 'id="usage-report"' in html and "2,004,507" in html  # the all-time total of tokens in
    fragment = client_a.get(
        "/usage?period=today&group=model",
        headers={"HX-Request": "true", "HX-Target": "usage-report"},
    ).get_data(as_text=True)
    assert fragment.lstrip().startswith('<section id="usage-report"') and "gpt-x" in fragment
    saved = client_a.post(
        "/usage/prices",
        headers={"HX-Request": "true"},
        data={"model": "claude-y", "input_per_mtok": "3", "output_per_mtok": "15", "period": "all"},
    )
    body = saved.get_data(as_text=True)
    assert (
        saved.status_code == 200 and "Saved the price of claude-y" in body and 'value="3.0"' in body
    )
