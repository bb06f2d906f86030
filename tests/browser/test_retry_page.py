"""Retry replaces the failure (issue 25, item 6), as a person sees it: the retry's answer takes
the failed answer's place, as its next version (‹ 2/2 ›; the failure is version 1), and no
Retry is left on the page once the chat has moved on. Real Chromium at 1280×800 and
390×844, light and dark."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario

from page_support import LOOKS, open_chat, send, serious_violations
from turn_support import make_chat

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_retry_puts_the_answer_in_the_failures_place(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"retry-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario.http_error(500), model=model)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send(page, "Try me")
    retry = page.get_by_role("button", name="Retry", exact=True)
    retry.wait_for()
    failure = page.locator("#transcript .msg-error")
    expect(failure).to_have_count(1)  # the saved failure may land just after its Retry
    # The failed turn has ended (its Retry before then is refused: turn_running).
    expect(page.locator("#composer-controls")).to_have_attribute("data-running", "0")
    shot(page, f"retry-failed-{size}-{scheme}")
    # The same chat open in another tab (another device): it sees the failure too.
    other = open_page_on(site, size, scheme)
    open_chat(other, chat["id"])
    other.locator("#transcript .msg-error").wait_for()

    scripted.enqueue(Scenario().text("Second time lucky."), model=model)
    retry.click()
    answer = page.locator("#transcript .msg-assistant", has_text="Second time lucky.")
    answer.wait_for()
    # In the failure's place: no error block, no Retry, and the answer is version 2 of 2.
    page.locator("#transcript .msg-error").wait_for(state="detached")
    assert page.get_by_role("button", name="Retry", exact=True).count() == 0
    versions = answer.locator(".msg-versions .version-count")
    versions.wait_for()
    assert versions.inner_text() == "2/2"
    assert page.locator("#transcript .msg-user").count() == 1
    shot(page, f"retry-answered-{size}-{scheme}")
    assert serious_violations(page, "#transcript") == []
    # In the other tab too, the answer takes the failure's place.
    elsewhere = other.locator("#transcript .msg-assistant", has_text="Second time lucky.")
    elsewhere.wait_for()
    other.locator("#transcript .msg-error").wait_for(state="detached")
    assert elsewhere.locator(".version-count").inner_text() == "2/2"
    assert other.locator("#transcript .msg-assistant").count() == 1
    shot(other, f"retry-answered-other-tab-{size}-{scheme}")
    assert other.errors == []

    # The failure is version 1, with its error; being the chat's end again, its Retry lives.
    answer.get_by_role("button", name="Previous version").click()
    first = page.locator("#transcript .msg-assistant .msg-error")
    first.wait_for()
    assert "1/2" in page.locator("#transcript .version-count").inner_text()
    assert page.get_by_role("button", name="Retry", exact=True).is_visible()
    shot(page, f"retry-version-one-{size}-{scheme}")

    # A reload shows the same.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("#transcript .msg-error").count() == 1
    assert page.locator("#transcript .version-count").inner_text() == "1/2"
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_no_dead_retry_is_left_after_a_new_question(
    open_page_on, site, api, scripted, shot, size, scheme
):
    model = f"stale-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario.http_error(500), model=model)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send(page, "First question")
    retry = page.get_by_role("button", name="Retry", exact=True)
    retry.wait_for()

    # The user asks something else instead: the old failure keeps its message, not its Retry.
    scripted.enqueue(Scenario().text("The answer to the second."), model=model)
    send(page, "Second question")
    page.locator("#transcript .msg-assistant", has_text="The answer to the second.").wait_for()
    retry.wait_for(state="hidden")
    assert page.locator("#transcript .msg-error").count() == 1
    shot(page, f"retry-stale-live-{size}-{scheme}")

    # A failure drawn by the page itself (after a reload) goes the same way.
    scripted.enqueue(Scenario.http_error(500), model=model)
    send(page, "Third question")
    page.locator("#transcript .msg-error").nth(1).wait_for()
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.locator("#transcript .msg-error").nth(1).wait_for()
    assert page.locator(".retry-button").count() == 1, "only the newest failure has Retry"
    retry.wait_for()
    scripted.enqueue(Scenario().text("The answer to the fourth."), model=model)
    send(page, "Fourth question")
    page.locator("#transcript .msg-assistant", has_text="The answer to the fourth.").wait_for()
    retry.wait_for(state="hidden")

    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.locator("#transcript .msg-error").nth(1).wait_for()
    assert page.locator(".retry-button").count() == 0, "a reloaded page draws no old Retry"
    shot(page, f"retry-stale-reloaded-{size}-{scheme}", full_page=True)
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []
