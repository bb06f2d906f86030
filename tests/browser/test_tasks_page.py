"""Real headless Chromium, desktop and phone: create a scheduled task on the Tasks page,
press Run now, watch the page follow the run to its end, and open its result in its chat."""

from __future__ import annotations

import uuid

import pytest

from numi.testing import Scenario
from page_support import LOOKS, no_horizontal_overflow, serious_violations, wrapped_texts
from turn_support import make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(("size", "scheme"), LOOKS)
def test_create_a_task_run_it_now_and_open_its_result(
    size, scheme, site, api, scripted, open_page, shot
):
    make_chat(api, scripted)  # the scripted endpoint, the user's default route
    name = f"Digest {uuid.uuid4().hex[:6]}"
    page = open_page(size, scheme, "/tasks")
    new_task = page.locator("details.task-new")
    if new_task.get_attribute("open") is None:
        new_task.locator("summary").click()
    form = new_task.locator("form")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Prompt").fill("Summarise what changed today.")
    form.get_by_label("Schedule").fill("every weekday at 8:00")
    assert form.locator("input[name=timezone]").input_value()  # the browser's zone
    assert no_horizontal_overflow(page)
    shot(page, f"task-form-{size}")
    form.get_by_role("button", name="Create task").click()
    task = page.locator("li.task", has=page.get_by_role("heading", name=name))
    task.wait_for()
    assert "Next run:" in task.inner_text()

    # A chat page in another tab hears of the run's new chat on its sidebar feed.
    chats_tab = page.context.new_page()
    chats_tab.goto("/")
    chats_tab.wait_for_selector("#sidebar[data-feed=open]", state="attached")
    scripted.enqueue(Scenario().text("Three things changed today."))
    task.get_by_role("button", name=f"Run {name} now").click()
    # The page follows the run (it asks for its body again while one runs) to its end.
    task.locator(".task-last .task-status[data-status=done]").wait_for(timeout=WAIT_SECONDS * 1000)
    task.locator("details.task-history summary").click()
    row = task.locator(".task-history tbody tr").first
    assert "Run now" in row.inner_text() and "Done" in row.inner_text()
    if size == "desktop":  # a run reads on one line, its header too (issue 43)
        assert wrapped_texts(task.locator(".task-history th, .task-history td")) == []
        table, card = task.locator(".task-history table").bounding_box(), task.bounding_box()
        assert table["x"] + table["width"] <= card["x"] + card["width"]  # inside its card
    assert no_horizontal_overflow(page)
    shot(task, f"task-{size}")
    assert serious_violations(page, "#tasks-body") == []
    assert page.errors == []

    # The answer is unread: the chats tab shows the sidebar's dot on the run's chat.
    chat_path = task.locator("a.task-result").get_attribute("href").split("#")[0]
    chats_tab.reload()
    # (attached: on a phone the sidebar waits in its drawer)
    chats_tab.locator(f'.chat-item.unread:has(a[href="{chat_path}"])').wait_for(state="attached")
    assert chats_tab.locator(f'.chat-item:has(a[href="{chat_path}"])').count() == 1
    task.locator("a.task-result").click()
    page.wait_for_url("**/c/*")
    page.get_by_text("Three things changed today.").wait_for()
    assert page.errors == []
