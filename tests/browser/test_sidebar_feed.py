"""The sidebar hears of the user's other chats on its feed socket (issue 36: it asked
`/chats/running` every 4 seconds): a chat answering in another tab shows its answering mark,
then its new title and the mark gone, in real headless Chromium at 1280×800 and 390×844,
with no request to the old poll URL."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario

from page_support import LOOKS, reveal_sidebar
from turn_support import Socket, make_chat

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_chat_answering_in_another_tab_shows_its_mark_and_title_in_this_sidebar(
    open_page, api, scripted, site, size, scheme, shot
):
    model = f"feed-{uuid.uuid4().hex[:8]}"
    busy = make_chat(api, scripted, model=model)
    shown = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text("Working on it").stall().text(" — done."), model=model)
    question = f"Plan the garden {model}"

    page = open_page(size, scheme, f"/c/{shown['id']}")
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    reveal_sidebar(page, size)
    item = page.locator(f"#chat-{busy['id']}")
    answering = item.locator(".answering-mark")
    expect(answering).to_be_hidden()
    page.wait_for_selector("#sidebar[data-feed=open]", state="attached")

    other_tab = Socket(site, busy["id"])
    try:
        other_tab.send(type="send", message=question, request_id=uuid.uuid4().hex)
        expect(answering).to_be_visible()
        shot(page, f"feed-answering-{size}")
        scripted.release()
        other_tab.events_until("turn_end")
    finally:
        other_tab.close()
    expect(answering).to_be_hidden()
    expect(item.locator(".chat-link-title")).to_have_text(question)
    shot(page, f"feed-titled-{size}")
    assert [url for url in asked if "/chats/running" in url] == []
    assert page.errors == []
