"""Real headless Chromium, desktop and phone: past a budget's soft cap the composer and the
context panel say "83 % of this month's budget for …", and Usage lists the budget with its
state (issue 41). A real turn spends it through the scripted provider; screenshots are saved
under tmp_path."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import make_chat, run_turn

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]


@pytest.mark.parametrize("size, scheme", LOOKS, ids=[f"{s}-{c}" for s, c in LOOKS])
def test_past_the_soft_cap_the_composer_panel_and_usage_say_so(
    open_page_on, site, api, scripted, shot, size, scheme
):
    name = f"Metered {size}"
    chat = make_chat(api, scripted, name=name)
    status, budget = api.post(
        "/api/budgets",
        {
            "scope": "endpoint",
            "endpoint_id": chat["endpoint"]["id"],
            "unit": "tokens",
            "soft_cap": 500,
            "hard_cap": 1000,
        },
    )
    assert status == 201, budget
    scripted.enqueue(Scenario().text("Spent.").usage(30, 800))
    run_turn(site, chat["id"], "Spend some tokens")
    line = f"83 % of this month's budget for {name}"

    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    composer = page.locator("#budget-warnings-composer")
    composer.wait_for()
    assert composer.inner_text().strip() == line
    shot(page, f"budget-composer-{size}-{scheme}", both_themes=True)
    page.locator("#context-gauge .gauge-button").click()
    panel = page.locator("#budget-warnings-panel")
    panel.wait_for()
    assert panel.inner_text().strip() == line
    shot(page, f"budget-panel-{size}-{scheme}")

    page.goto(f"{site.url}/usage")
    row = page.locator("#usage-budgets .budget-row", has_text=name)
    row.scroll_into_view_if_needed()
    assert row.get_attribute("data-state") == "warning"
    assert f"This month's budget for {name}" in row.inner_text()
    shot(page, f"budget-usage-{size}-{scheme}", both_themes=True)
    assert page.errors == []
