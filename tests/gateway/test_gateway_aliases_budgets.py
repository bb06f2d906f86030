"""Model aliases and budgets on /v1, through the official SDKs against the live gateway:
an alias is listed and answers through its chain; a budget's hard cap refuses a /v1
call with the chat path's code, in each protocol's shape, and an alias skips the route
whose budget is spent. Each test makes its own endpoint, so the package's others are
not touched by its budget."""

from __future__ import annotations

import openai
import pytest

from numi.testing import Scenario


def _endpoint(gateway, provider, name: str) -> dict:
    status, endpoint = gateway.api.post(
        "/api/endpoints",
        {
            "name": name,
            "kind": "openai_chat",
            "base_url": provider.openai_base_url,
            "api_key": "k",
            "default_model": "scripted-model",
        },
    )
    assert status == 201, endpoint
    return endpoint


def test_an_alias_is_listed_and_answers_through_its_chain(gateway, scripted):
    status, made = gateway.api.post(
        "/api/aliases",
        {"name": "fast", "models": ["beta/scripted-model", "alpha/scripted-reasoning"]},
    )
    assert status == 201, made
    assert [r["endpoint_id"] for r in made["routes"]] == [gateway.beta["id"], gateway.alpha["id"]]
    client = gateway.openai()
    assert "fast" in [m.id for m in client.models.list()]
    scripted.enqueue(Scenario.http_error(529, retry_after=0), model="scripted-model")
    scripted.enqueue(Scenario().text("From the second route."), model="scripted-reasoning")
    raw = client.chat.completions.with_raw_response.create(
        model="fast", messages=[{"role": "user", "content": "Hi"}]
    )
    done = raw.parse()
    assert done.choices[0].message.content == "From the second route."
    assert done.model == "alpha/scripted-reasoning"
    assert "529" in raw.headers["x-numi-fallback"]
    # A key limited to beta sees the alias (it has a route there) and uses beta only.
    scoped, _ = gateway.new_key(name="beta only", endpoints=[gateway.beta["id"]])
    scripted.enqueue(Scenario().text("Beta alone."), model="scripted-model")
    alone = gateway.openai(scoped).chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "Hi"}]
    )
    assert alone.model == "beta/scripted-model"
    # Refusals: a name with "/", a taken name, a model of no endpoint.
    for body, code in (
        ({"name": "a/b", "models": ["alpha/scripted-model"]}, "invalid_alias_name"),
        ({"name": "fast", "models": ["alpha/scripted-model"]}, "alias_exists"),
        ({"name": "slow", "models": ["nowhere/x"]}, "invalid_alias_routes"),
        ({"name": "slow", "routes": []}, "invalid_alias_routes"),
    ):
        status, refused = gateway.api.post("/api/aliases", body)
        assert status in (400, 409) and refused["error"]["code"] == code, refused
    status, listed = gateway.api.get("/api/aliases")
    assert [a["name"] for a in listed["aliases"]] == ["fast"]
    assert gateway.api.call("DELETE", f"/api/aliases/{made['id']}")[0] == 204
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="fast", messages=[{"role": "user", "content": "Hi"}])


def test_a_spent_budget_refuses_v1_calls_and_an_alias_skips_its_route(
    gateway, scripted, provider, anthropic_sdk
):
    gamma = _endpoint(gateway, provider, "gamma")
    status, budget = gateway.api.post(
        "/api/budgets",
        {
            "scope": "endpoint",
            "endpoint_id": gamma["id"],
            "period": "day",
            "unit": "tokens",
            "hard_cap": 10,
        },
    )
    assert status == 201, budget
    client = gateway.openai()
    scripted.enqueue(Scenario().text("Spent it.").usage(11, 4), model="scripted-model")
    first = client.chat.completions.create(
        model="gamma/scripted-model", messages=[{"role": "user", "content": "Hi"}]
    )
    assert first.choices[0].message.content == "Spent it."
    status, budgets = gateway.api.get("/api/budgets")
    spent = next(b for b in budgets["budgets"] if b["id"] == budget["id"])
    assert spent["spent"] == 15 and spent["reserved"] == 0
    # The user's default fallback (beta) answers instead of a route whose budget is spent.
    scripted.enqueue(Scenario().text("Beta instead."), model="scripted-reasoning")
    instead = client.chat.completions.create(
        model="gamma/scripted-model", messages=[{"role": "user", "content": "Again"}]
    )
    assert instead.model == "beta/scripted-reasoning"
    # A key that may use gamma alone has no route left: refused, with the chat path's code.
    only_gamma, _ = gateway.new_key(name="gamma only", endpoints=[gamma["id"]])
    with pytest.raises(openai.RateLimitError) as refused:
        gateway.openai(only_gamma).chat.completions.create(
            model="gamma/scripted-model", messages=[{"role": "user", "content": "Again"}]
        )
    assert refused.value.body["code"] == "budget_exceeded"
    with pytest.raises(anthropic_sdk.RateLimitError) as refused_too:
        gateway.anthropic(only_gamma).messages.create(
            model="gamma/scripted-model",
            max_tokens=100,
            messages=[{"role": "user", "content": "Again"}],
        )
    assert refused_too.value.body["error"]["code"] == "budget_exceeded"
    status, alias = gateway.api.post(
        "/api/aliases",
        {"name": "thrifty", "models": ["gamma/scripted-model", "alpha/scripted-model"]},
    )
    assert status == 201
    scripted.enqueue(Scenario().text("Alpha pays."), model="scripted-model")
    skipped = client.chat.completions.create(
        model="thrifty", messages=[{"role": "user", "content": "Hi"}]
    )
    assert skipped.model == "alpha/scripted-model"
    # The gateway's user is the package's: later modules' keys would list the alias.
    assert gateway.api.call("DELETE", f"/api/aliases/{alias['id']}")[0] == 204
