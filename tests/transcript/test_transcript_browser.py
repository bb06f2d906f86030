"""Real headless Chromium: edit a question and watch the new answer stream in; fork a chat;
delete a turn (with the confirmation); the topic outline; search from the sidebar."""

from __future__ import annotations

import json


import pytest

from numi.testing import Scenario
from turn_support import Socket, make_chat
from server_wait import WAIT_SECONDS


pytestmark = pytest.mark.browser


def _ask(server, chat_id, text):
    socket = Socket(server, chat_id)
    socket.send(type="send", message=text, request_id=f"b-{text}")
    socket.events_until("turn_end")
    socket.close()


def test_edit_and_regenerate_then_fork_in_the_browser(browser_page, server, api, scripted):
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Rome is the capital."), Scenario().text("Tuscany is lovely."))
    _ask(server, chat["id"], "Capital of Italy?")
    _ask(server, chat["id"], "Best region?")
    history = api.history(chat["id"])
    question = history[0]

    page = browser_page(server)
    page.goto(f"{server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("article.msg").count() == 4
    # Regenerate is offered on the last answer only.
    assert page.locator(".action-regenerate").count() == 2
    assert page.locator(".action-regenerate:visible").count() == 1

    # Edit the first question inline; the answer streams over the page's WebSocket.
    scripted.enqueue(Scenario().text("Madrid is the capital of Spain.", chunks=6).delay(0.05))
    page.click(f"#msg-{question['id']} .action-edit")
    page.wait_for_selector(f"#msg-{question['id']}-edit")
    page.fill(f"#msg-{question['id']}-edit", "Capital of <Spain>?")
    # Add a file to the edited question, through the same upload the composer uses.
    page.set_input_files(
        f"#msg-{question['id']} .attach-input",
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"Spain notes: Madrid."}],
    )
    page.wait_for_selector(
        f"#msg-{question['id']} .attach-chips .attachment-chip[data-attachment-id]"
    )
    # Submit once htmx has settled every swap: a click while it settles (a slow machine)
    # would send the plain form instead of the htmx request the test means.
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')"
    )
    page.click(f"#msg-{question['id']} button[type=submit]")
    page.wait_for_function(
        "() => document.body.innerText.includes('Madrid is the capital of Spain.')",
        timeout=WAIT_SECONDS * 1000,
    )
    page.wait_for_function("() => !document.body.innerText.includes('Tuscany')")
    page.wait_for_selector("#send-button")
    history = api.history(chat["id"])
    # The edited question is a new version beside the old one (‹ 2/2 ›).
    assert (
        page.locator(f"#msg-{history[0]['id']} .msg-body").inner_text().strip()
        == "Capital of <Spain>?"
    )
    assert page.locator(f"#msg-{history[0]['id']} .version-count").inner_text() == "2/2"
    assert "Best region?" not in page.locator("#transcript").inner_text()
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Capital of <Spain>?"),
        ("assistant", "Madrid is the capital of Spain."),
    ]
    # (and the `request` part: what the page's send asked for)
    assert [p["type"] for p in history[0]["content_parts"]] == ["request", "attachment"]
    assert "Spain notes: Madrid." in json.dumps(scripted.requests[-1].body), (
        "the added file reached the model"
    )

    # After a reload the saved answer has its actions; fork at it.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    answer = history[1]
    assert page.locator(f"#msg-{answer['id']} .action-regenerate").is_visible()
    page.click(f"#msg-{answer['id']} .msg-more > summary")  # Fork is in the "…" menu
    page.click(f"#msg-{answer['id']} .action-fork button")
    page.wait_for_url(lambda url: chat["id"] not in url and "/c/" in url)
    page.wait_for_selector("article.msg-assistant")
    assert "(fork)" in page.title()
    assert [
        page.locator("article.msg .msg-body").nth(i).inner_text().strip() for i in range(2)
    ] == ["Capital of <Spain>?", "Madrid is the capital of Spain."]
    forked_id = page.url.rsplit("/", 1)[-1].split("#")[0]
    assert [m["content"] for m in api.history(forked_id)] == [
        "Capital of <Spain>?",
        "Madrid is the capital of Spain.",
    ]

    # Delete the turn in the fork: a confirmation, then the transcript updates in place.
    page.on("dialog", lambda dialog: dialog.accept())
    first = api.history(forked_id)[0]
    page.click(f"#msg-{first['id']} .msg-more > summary")
    page.click(f"#msg-{first['id']} .action-delete button")
    page.wait_for_function("() => document.querySelectorAll('article.msg').length === 0")
    assert api.history(forked_id) == []
    assert len(api.history(chat["id"])) == 2  # the original keeps its transcript

    # Search from the sidebar: messages mode, highlighted snippet, jump to the message.
    page.goto(f"{server.url}/c/{chat['id']}")
    page.click("#search-toggle > summary")  # the search opens from its icon
    page.check(".search-mode input[value=messages]")
    page.fill(".chat-search", "madrid")
    page.wait_for_selector(".search-hit mark")
    assert page.locator(".search-hit mark").first.inner_text().lower() == "madrid"
    # The click blurs the box: that must not search again. It did (the box's change event),
    # and the same results swapped in between the press and the release lost the click.
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if "/search" in r.url else None)
    page.click(".search-hit a")
    page.wait_for_url(f"**#msg-{answer['id']}", timeout=WAIT_SECONDS * 1000)
    assert searches == []
    page.wait_for_selector(f"#msg-{answer['id']}.jumped")  # opened on the hit, highlighted

    # The outline of the chat.
    page.click("#topics summary")
    page.wait_for_selector("#topics .topic-list a")
    assert page.locator("#topics .topic-list a").first.inner_text() == "Capital of <Spain>?"
    assert page.console_errors == []
    page.close()
