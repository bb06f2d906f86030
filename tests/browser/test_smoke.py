"""Real headless Chromium against the real server: the page loads, a chat is created and
renamed inline, and the console stays clean (CSP violations count as errors)."""

from __future__ import annotations


import pytest
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(WAIT_SECONDS * 1000)
    live_server.sign_in(page)
    errors: list[str] = []
    page.on(
        "console",
        lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None,
    )
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.console_errors = errors
    yield page
    context.close()


def test_new_chat_and_inline_rename(page, live_server):
    page.goto("/")
    assert page.title().endswith("Numi")
    page.wait_for_function("window.htmx !== undefined")

    page.click("#new-chat")
    page.wait_for_url("**/c/*")
    chat_id = page.url.rsplit("/", 1)[1]
    item = page.locator(f"#chat-{chat_id}")
    assert item.locator(".chat-link").inner_text() == "New chat"

    item.hover()
    item.locator(".row-menu-button").click()
    item.locator(".row-menu .menu-item", has_text="Rename").click()
    field = page.locator(f"#chat-{chat_id} input[name=title]")
    field.wait_for()
    field.fill("Renamed in Chromium ✓")
    field.press("Enter")
    page.locator(f"#chat-{chat_id} .chat-link", has_text="Renamed in Chromium ✓").wait_for()

    # The rename was saved: a fresh load shows it in the sidebar.
    page.reload()
    assert page.locator(f"#chat-{chat_id} .chat-link").inner_text() == "Renamed in Chromium ✓"
    page.goto("/settings")
    page.wait_for_load_state("networkidle")
    assert page.console_errors == []


def test_a_csp_violation_would_be_caught(page, live_server):
    """The console check above is only worth something if CSP errors reach it."""
    page.goto("/")
    csp = lambda message: message.type == "error" and "Content Security Policy" in message.text  # noqa: E731
    with page.expect_console_message(csp):  # waits for the report, however long it takes
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.x = 1'; "
            "document.body.append(s); }"
        )
    assert page.evaluate("window.x") is None, "the inline script did not run"
    assert any(
        "Content Security Policy" in e or "Content-Security-Policy" in e
        for e in page.console_errors
    ), page.console_errors
