"""Real headless Chromium: send, watch tokens stream, reload mid-turn, continue, stop."""

from __future__ import annotations


import pytest

from numi.testing import Scenario

from turn_support import Api, make_chat, turn_server_env
from server_wait import WAIT_SECONDS


pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def stream_server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def test_send_stream_reload_mid_turn_and_stop(browser_page, scripted, stream_server):
    api = Api(stream_server.url)
    chat = make_chat(api, scripted)
    words = [f"word{i}" for i in range(80)]
    scripted.enqueue(Scenario().text(" ".join(words), chunks=80).delay(0.1))
    page = browser_page(stream_server)
    page.goto(f"{stream_server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "Tell me **eighty** words")
    page.press("#composer-input", "Enter")

    # Tokens appear while the model is still writing.
    page.wait_for_function(
        "() => (document.querySelector('.turn-live .msg-body')?.textContent || '').includes('word5')"
    )
    assert page.locator("#stop-button").is_visible()
    assert (
        page.locator(".msg-user .msg-body").first.inner_text().strip() == "Tell me **eighty** words"
    )

    # Reload mid-turn: the saved question is there once and the answer keeps streaming.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.wait_for_function(
        "() => (document.querySelector('.turn-live .msg-body')?.textContent || '').includes('word30')",
        timeout=WAIT_SECONDS * 1000,
    )
    assert page.locator(".msg-user").count() == 1
    assert page.locator("#stop-button").is_visible()

    page.click("#stop-button")
    page.wait_for_selector(".msg-stopped[data-code=cancelled]")
    page.wait_for_selector("#send-button")
    saved = api.history(chat["id"])[-1]
    assert saved["role"] == "assistant" and saved["meta"]["error"]["code"] == "cancelled"
    assert "word30" in saved["content"] and "word79" not in saved["content"]
    # The partial answer is on the page as a saved, rendered message.
    assert page.locator(f"#msg-{saved['id']} .msg-body").inner_text().startswith("word0 word1")

    assert page.console_errors == []


def test_a_finished_answer_renders_markdown_and_metrics(browser_page, scripted, stream_server):
    api = Api(stream_server.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(
        Scenario()
        .reasoning("Consider the question.")
        .text("Here is **bold** and `code`.", chunks=4)
        .usage(None, 8)  # the prompt tokens as the server counts them: they calibrate the gauge
    )
    page = browser_page(stream_server)
    page.goto(f"{stream_server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.wait_for_selector("#context-gauge .gauge-button")
    before = float(page.get_attribute("#context-gauge", "data-tokens"))
    page.fill("#composer-input", "Format something")
    page.click("#send-button")
    page.wait_for_selector("article.msg-assistant .msg-body strong")
    page.wait_for_selector("#send-button")
    answer = api.history(chat["id"])[-1]
    body = page.locator(f"#msg-{answer['id']}-body")
    body.wait_for()
    assert body.locator("strong").inner_text() == "bold"
    assert body.locator("code").inner_text() == "code"
    # The metrics are on demand: Info in the answer's "…" menu.
    metrics = page.locator(f"#msg-{answer['id']}-metrics")
    assert not metrics.is_visible()
    page.locator(f"#msg-{answer['id']} .msg-more > summary").click()
    page.locator(f"#msg-{answer['id']} .msg-menu summary", has_text="Info").click()
    assert "8 out" in metrics.inner_text()
    assert (
        page.locator(f"#msg-{answer['id']} .reasoning summary").inner_text().startswith("Reasoning")
    )
    # The finished turn refreshes the context ring in the composer.
    page.wait_for_function(
        f"() => parseFloat(document.querySelector('#context-gauge')?.getAttribute('data-tokens') || '0') > {before}"
    )
    assert page.console_errors == []
