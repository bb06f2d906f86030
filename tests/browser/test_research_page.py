"""Research (issue 38) from the composer: the Research toggle with its budget (a cost limit
only when given), the run's progress drawn live in the chat (plan, pages read, the elapsed
time ticking between events), a reload mid-run that draws it whole again, and Stop and
write, which writes the cited report from the pages read so far. Real Chromium,
desktop-light and phone-dark, against a local search and page server."""

from __future__ import annotations

from typing import Iterator

import pytest

from numi.testing import Scenario

from page_support import LOOKS, in_viewport, open_chat, serious_violations
from research_support import ResearchWeb, search_on_server
from turn_support import make_chat

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def research_web() -> Iterator[ResearchWeb]:
    web = ResearchWeb()
    yield web
    web.close()


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_start_research_watch_it_reload_and_stop_and_write(
    open_page, site, api, scripted, research_web, shot, size, scheme
):
    research_web.reset()
    search_on_server(site, research_web.url)
    chat = make_chat(api, scripted)
    research_web.held.add("otters-2")  # the run waits on this page while the test looks
    scripted.enqueue(Scenario().text("1. otters sleep\n2. otters rafts"))

    page = open_page(size, scheme)
    open_chat(page, chat["id"])
    page.locator("#composer-plus > summary").click()  # Research is in the composer's "+"
    page.locator("#research-picker summary").click()
    page.get_by_role("checkbox", name="Research mode for the next message").check()
    assert page.get_by_label("Most pages").input_value() == "12"  # the budget, before it starts
    page.get_by_label("Most pages").fill("5")
    cost = page.get_by_label("Most cost")  # no cost limit unless one is given
    assert cost.input_value() == "" and cost.get_attribute("placeholder") == "no limit"
    assert in_viewport(page, "#research-picker .research-options")
    shot(page, f"research-toggle-{size}-{scheme}")
    page.fill("#composer-input", "How do otters sleep?")
    page.press("#composer-input", "Enter")

    progress = page.locator("#transcript .research-progress")
    progress.locator(".research-source", has_text="Page otters-1 <b>bold</b>").wait_for()
    assert "otters rafts" in progress.locator(".research-plan").inner_text()
    assert "1 / 5 pages" in progress.locator(".research-meters").inner_text()
    assert not page.locator("#research-mode:checked").count(), "the toggle is cleared"
    # No event comes while the held page is read, yet the elapsed time goes on.
    elapsed = progress.locator(".research-elapsed")
    assert elapsed.get_attribute("data-started-at")
    page.wait_for_function(
        "(t) => document.querySelector('#transcript .research-elapsed').textContent !== t",
        arg=elapsed.inner_text(),
    )
    assert elapsed.inner_text().endswith(" elapsed")
    shot(page, f"research-running-{size}-{scheme}", both_themes=True)

    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    progress = page.locator("#transcript .research-progress")
    progress.locator(".research-source", has_text="Page otters-1").wait_for()
    assert progress.locator(".research-plan li").count() == 2
    shot(page, f"research-reloaded-{size}-{scheme}")
    assert serious_violations(page, "#transcript") == []

    scripted.enqueue(Scenario().text("Otters hold hands while they sleep [1]."))
    progress.get_by_role("button", name="Stop and write").click()
    research_web.release.set()
    report = page.locator("#transcript .msg-assistant", has_text="Otters hold hands")
    report.wait_for()
    report.locator(".sources-list summary").click()
    assert "Page otters-1" in report.locator(".sources-list").inner_text()
    page.locator("#transcript .research-progress[data-phase=done]").wait_for()
    assert not page.locator("#transcript .research-elapsed[data-started-at]").count()  # stopped
    assert research_web.fetches["otters-1"] == 1
    shot(page, f"research-report-{size}-{scheme}", both_themes=True)
