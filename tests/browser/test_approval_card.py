"""The bash approval card shows the whole command (issue 28, item 6): an extra argument and
padding newlines must not hide `touch HIDDEN_BELOW` in a clipped box, at desktop and phone
sizes in real Chromium."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, make_chat, turn_server_env

pytestmark = pytest.mark.browser

PADDED = {
    "command": "echo harmless" + "\n" * 60 + "touch HIDDEN_BELOW",
    "comment": "x" * 40 + "\n" * 40,
}


@pytest.fixture(scope="module")
def card_server(live_server_factory):
    return live_server_factory(**turn_server_env(NUMI_APPROVAL_TIMEOUT_SECONDS="60"))


def bash_card(browser_page, server, scripted, tmp_path, size, arguments):
    """A chat page at `size` whose model asks to run bash with `arguments`: the page, once
    the approval card's command is shown."""
    api = Api(server.url)
    chat = make_chat(api, scripted, settings={"tools": ["bash"], "workspace": str(tmp_path)})
    scripted.enqueue(Scenario().tool_call("bash", arguments))
    scripted.enqueue(Scenario().text("Finished."))
    page = browser_page(server, viewport={"width": size[0], "height": size[1]})
    page.goto(f"{server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "run it")
    page.press("#composer-input", "Enter")
    return page, page.wait_for_selector(".tool-approval .tool-command")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_padded_command_is_shown_whole(browser_page, card_server, scripted, tmp_path, size):
    page, command = bash_card(browser_page, card_server, scripted, tmp_path, size, PADDED)
    hidden = page.locator(".tool-approval .tool-command", has_text="touch HIDDEN_BELOW")
    assert hidden.count() == 1
    # Whole: no box clips it (its scroll height is its height) and the line is on screen
    # once the card is scrolled to, without scrolling inside anything.
    clipped = command.evaluate(
        "e => e.scrollHeight > e.clientHeight + 1 || getComputedStyle(e).maxHeight !== 'none'"
    )
    assert not clipped
    assert "⏎ ×59 blank lines" in command.inner_text()
    # Its risks in words, above the command: the `touch` far below counts too.
    risks = page.locator(".tool-approval .tool-risks li")
    assert risks.all_inner_texts() == ["Runs a shell command in your workspace", "Writes files"]
    assert risks.last.bounding_box()["y"] < command.bounding_box()["y"]
    assert "61 lines" in page.locator(".tool-approval .tool-command-count").inner_text()
    ignored = page.locator(".tool-approval .tool-ignored")
    assert "comment" in ignored.inner_text() and "ignored" in ignored.inner_text().lower()
    page.locator(
        ".tool-approval .tool-command .command-line", has_text="touch HIDDEN_BELOW"
    ).scroll_into_view_if_needed()
    assert page.locator(".tool-approval .command-line", has_text="touch HIDDEN_BELOW").is_visible()
    shot = tmp_path / f"approval-{size[0]}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert not page.console_errors


RLO = "echo \u202e; touch HIDDEN_BIDI #\u202c done"  # issue 34's repro


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_bidi_override_is_shown_as_escapes(browser_page, card_server, scripted, tmp_path, size):
    """The right-to-left override cannot make `touch HIDDEN_BIDI` read as a comment: the
    command reads in the order it runs, each control as its code point, with a badge."""
    arguments = {"command": RLO}
    page, command = bash_card(browser_page, card_server, scripted, tmp_path, size, arguments)
    assert command.inner_text() == "echo <U+202E>; touch HIDDEN_BIDI #<U+202C> done"
    marks = page.locator(".tool-approval .tool-command mark.hidden-char")
    assert marks.all_inner_texts() == ["<U+202E>", "<U+202C>"]
    badge = page.locator(".tool-approval .hidden-chars-badge")
    assert badge.is_visible() and "contains hidden characters" in badge.inner_text()
    # Drawn left to right: "touch" is left of "HIDDEN_BIDI", as it is run.
    boxes = command.evaluate(
        """e => { const r = document.createRange(); const t = e.textContent;
          const at = s => { const i = t.indexOf(s); let n = 0, node;
            const w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
            while ((node = w.nextNode())) { if (i < n + node.length) {
              r.setStart(node, i - n); r.setEnd(node, i - n + s.length);
              return r.getBoundingClientRect().left; } n += node.length; } };
          return [at("touch"), at("HIDDEN_BIDI")]; }"""
    )
    assert boxes[0] < boxes[1]
    page.screenshot(path=str(tmp_path / f"bidi-{size[0]}.png"), full_page=True)
    assert not page.console_errors
