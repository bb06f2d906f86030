"""Real headless Chromium, desktop and phone: the Usage page's budget forms (issue 41). A
budget is added for an endpoint (a soft cap above the hard cap is refused in the form first,
with what was typed kept), its period's time zone is the browser's, a real turn through the
scripted provider spends it, its history shows this period's spending, and it is edited and
deleted. Screenshots are saved under tmp_path."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from turn_support import make_chat, run_turn

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]


@pytest.mark.parametrize("size, scheme", LOOKS, ids=[f"{s}-{c}" for s, c in LOOKS])
def test_a_budget_is_added_refused_shown_with_its_history_edited_and_deleted(
    open_page_on, site, api, scripted, shot, size, scheme
):
    name = f"Paid {size}"
    chat = make_chat(api, scripted, name=name)
    page = open_page_on(site, size, scheme, "/usage")
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")

    form = page.locator("#budget-add-form")
    form.scroll_into_view_if_needed()
    expect(form.locator("input[name=timezone]")).to_have_value(zone)
    form.locator("select[name=applies_to]").select_option(label=name)
    form.locator("select[name=unit]").select_option("tokens")
    form.locator("input[name=soft_cap]").fill("1200")
    form.locator("input[name=hard_cap]").fill("1000")
    form.get_by_role("button", name="Add budget").click()
    error = page.locator("#budget-add-form .form-error")
    expect(error).to_have_text("The soft cap must not be above the hard cap.")
    expect(page.locator("#budget-add-form input[name=soft_cap]")).to_have_value("1200")
    shot(page.locator("#usage-budgets"), f"budget-form-refused-{size}-{scheme}")
    assert api.get("/api/budgets")[1]["budgets"] == []  # nothing changed

    page.locator("#budget-add-form input[name=soft_cap]").fill("500")
    page.locator("#budget-add-form").get_by_role("button", name="Add budget").click()
    row = page.locator("#usage-budgets .budget-row", has_text=name)
    expect(row).to_contain_text("Within")
    [budget] = api.get("/api/budgets")[1]["budgets"]
    assert (budget["endpoint_id"], budget["timezone"]) == (chat["endpoint"]["id"], zone)

    scripted.enqueue(Scenario().text("Spent.").usage(30, 800))
    run_turn(site, chat["id"], "Spend some tokens")
    page.reload()
    item = page.locator(f"#budget-{budget['id']}")
    item.locator("summary").click()
    now = item.locator(".budget-period[aria-current=true]")
    expect(now).to_contain_text("830 tokens")
    expect(now).to_contain_text("(now)")
    item.scroll_into_view_if_needed()
    shot(page.locator("#usage-budgets"), f"budget-history-{size}-{scheme}")

    edit = item.locator("form.budget-form")
    edit.locator("input[name=hard_cap]").fill("2000")
    edit.get_by_role("button", name="Save").click()
    expect(page.locator("#usage-budgets .budget-row", has_text=name)).to_contain_text("2000")
    assert api.get("/api/budgets")[1]["budgets"][0]["hard_cap"] == 2000

    page.locator(f"#budget-{budget['id']} summary").click()
    page.get_by_role("button", name=f"Delete This month's budget for {name}").click()
    expect(page.locator("#usage-budgets")).to_contain_text("No budgets yet.")
    assert api.get("/api/budgets")[1]["budgets"] == []
    # The refused add's 400, which htmx reports as it swaps the form in, is the only one.
    assert [e for e in page.errors if "400" not in e] == []
    assert len(page.errors) == 2
