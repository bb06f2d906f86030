"""Tool cards (issue 25, items 9 and 7), as a person sees them: the command once while it waits
for approval; a denial reads "Denied", not a red "failed"; a finished card keeps its arguments
and looks the same live and after a reload; a turn's tool steps and its final answer read
as one answer block; the chat's tool chooser lists tools by label, in order, without
"(admin)" for the single user. Real Chromium at 1280×800 and 390×844, light and dark."""

from __future__ import annotations

import http.client
import json
import re
import sys
import uuid
from pathlib import Path

import pytest

from numi.testing import Scenario

from page_support import LOOKS, open_chat, send, serious_violations
from turn_support import make_chat

# The tool tests' loopback page server, for real fetch_page calls.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from tools_web_support import WebServers  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site_env():
    return {"NUMI_APPROVAL_TIMEOUT_SECONDS": "60"}


def cards(page) -> list[dict]:
    """Every tool card as drawn: its classes, its text (open or not), its colour."""
    return page.eval_on_selector_all(
        "#transcript .tool-card",
        """els => els.map(e => ({id: e.id, cls: e.className,
            text: e.textContent.replace(/\\s+/g, ' ').trim(),
            status: getComputedStyle(e.querySelector('.tool-status')).color}))""",
    )


def danger_colour(page) -> str:
    return page.evaluate(
        """() => { const probe = document.createElement('span'); probe.style.color = 'var(--danger)';
        document.body.append(probe); const c = getComputedStyle(probe).color; probe.remove(); return c; }"""
    )


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_tool_cards_live_and_reloaded(
    open_page_on, site, api, scripted, shot, tmp_path, size, scheme
):
    model = f"cards-{uuid.uuid4().hex[:8]}"
    chat = make_chat(
        api, scripted, model=model, settings={"tools": ["bash", "echo"], "workspace": str(tmp_path)}
    )
    scripted.enqueue(
        Scenario().tool_call("bash", {"command": "echo only-once-please"}), model=model
    )
    scripted.enqueue(Scenario().text("Understood, I will not run it."), model=model)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send(page, "Run something")

    # Waiting for approval: the command is on the card once, its risk in words above it.
    waiting = page.locator(".tool-card.tool-approval")
    waiting.wait_for()
    assert waiting.inner_text().count("echo only-once-please") == 1
    assert waiting.locator("summary .tool-sentence").inner_text() == "Run a command"
    risk = waiting.locator(".tool-risks li").first
    assert risk.inner_text() == "Runs a shell command in your workspace"
    command_box = waiting.locator(".tool-command").bounding_box()
    assert risk.bounding_box()["y"] + risk.bounding_box()["height"] <= command_box["y"]
    shot(page, f"cards-approval-{size}-{scheme}")

    # Denied: it says so, quietly, and the arguments stay.
    waiting.get_by_role("button", name="Deny").click()
    denied = page.locator(".tool-card.tool-denied")
    denied.wait_for()
    page.locator("#transcript .msg-assistant", has_text="I will not run it").wait_for()
    assert "Denied" in denied.inner_text() and "failed" not in denied.inner_text()
    assert "echo only-once-please" in denied.text_content()
    assert denied.locator("summary").inner_text().startswith("Run echo only-once-please")
    danger = danger_colour(page)
    assert denied.locator(".tool-status").evaluate("e => getComputedStyle(e).color") != danger

    # A tool that runs: its finished card keeps the arguments it was called with.
    scripted.enqueue(Scenario().tool_call("echo", {"greeting": "hello", "count": 2}), model=model)
    scripted.enqueue(Scenario().text("The echo said hello.", chunks=1).stall(), model=model)
    send(page, "Echo something")
    # While the final answer streams, it is already part of the step's block: no label.
    streaming = page.locator(".turn-live.msg-continued", has_text="The echo said hello.")
    streaming.wait_for()
    assert not streaming.locator(".msg-role").is_visible()
    shot(page, f"cards-streaming-{size}-{scheme}")
    scripted.release()
    page.locator("#transcript .msg-assistant", has_text="The echo said hello.").wait_for()
    page.locator(".turn-live").wait_for(state="detached")
    done = page.locator(".tool-card.tool-done", has_text="greeting")
    done.wait_for()
    assert '"greeting": "hello"' in done.text_content()
    assert re.search(r"\d+\.\d s", done.inner_text())  # its time, in seconds
    assert done.locator("summary .tool-sentence").inner_text() == "Used echo"  # a plugin's tool
    done.scroll_into_view_if_needed()
    shot(page, f"cards-sentences-{size}-{scheme}")
    for card in page.locator("#transcript .tool-card").all():
        card.locator("summary").click()
    shot(page, f"cards-live-{size}-{scheme}", full_page=True)
    live = cards(page)

    # The tool step and its answer read as one answer block: one label, no gap.
    answer = page.locator("#transcript .msg-assistant", has_text="The echo said hello.")
    step = page.locator(
        "#transcript .msg-assistant", has=page.locator(".tool-done", has_text="greeting")
    )
    assert "msg-step" in step.get_attribute("class")
    assert "msg-continued" in answer.get_attribute("class")
    assert not answer.locator(".msg-role").is_visible()
    gap = page.evaluate(
        """([a, b]) => b.getBoundingClientRect().top - a.getBoundingClientRect().bottom""",
        [step.element_handle(), answer.element_handle()],
    )
    assert gap < 12, f"the step and its answer are apart by {gap}px"
    step.scroll_into_view_if_needed()
    shot(page, f"cards-one-answer-{size}-{scheme}")

    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.locator(".tool-card.tool-done").first.wait_for()
    for card in page.locator("#transcript .tool-card").all():
        card.locator("summary").click()
    shot(page, f"cards-reloaded-{size}-{scheme}", full_page=True)
    reloaded = cards(page)
    # The same cards, class for class and word for word (the duration included).
    assert [(c["id"], c["cls"], c["text"]) for c in reloaded] == [
        (c["id"], c["cls"], c["text"]) for c in live
    ]
    assert "msg-continued" in page.locator(
        "#transcript .msg-assistant", has_text="The echo said hello."
    ).get_attribute("class")
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_tool_chooser_lists_labels_in_order(
    open_page_on, site, api, scripted, shot, size, scheme
):
    chat = make_chat(api, scripted)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    page.locator("#chat-more > summary").click()  # the header's "…" menu
    page.locator(".chat-settings > summary").click()
    tools = page.locator(f"#chat-{chat['id']}-tools")
    tools.wait_for()
    labels = [t.strip() for t in tools.locator(".tool-choice label").all_inner_texts()]
    assert labels[:3] == ["Web search", "Fetch web pages", "Search my documents"]
    assert labels.index("Workspace: list files") < labels.index("Workspace: write files")
    assert labels.index("Workspace: patch files") < labels.index("Bash commands")
    # The code interpreter (the `code` extra) is the last shipped tool, then the plugins'.
    last_shipped = labels.index("Code (run Python in a kernel)")
    assert labels.index("Bash commands") + 1 == last_shipped
    plugins = labels[last_shipped + 1 :]
    assert plugins == sorted(plugins, key=str.casefold) and "echo" in plugins
    assert not any("_" in label for label in labels[:last_shipped])
    assert "(admin)" not in tools.inner_text()
    tools.scroll_into_view_if_needed()
    shot(page, f"tool-chooser-{size}-{scheme}")
    assert serious_violations(page, f"#chat-{chat['id']}-tools") == []
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_finished_step_reads_as_one_sentence(
    open_page_on, site, api, scripted, shot, tmp_path, size, scheme
):
    """Approved and run: one quiet sentence, "Ran `…`", that opens into the card on Enter
    and closes again on a click."""
    model = f"words-{uuid.uuid4().hex[:8]}"
    chat = make_chat(
        api, scripted, model=model, settings={"tools": ["bash"], "workspace": str(tmp_path)}
    )
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])

    command = "echo ran-in-words > out.txt && cat out.txt"
    scripted.enqueue(Scenario().tool_call("bash", {"command": command}), model=model)
    scripted.enqueue(Scenario().text("It printed ran-in-words."), model=model)
    send(page, "Run it for real")
    waiting = page.locator(".tool-card.tool-approval")
    waiting.wait_for()
    assert waiting.locator(".tool-risks li").all_inner_texts() == [
        "Runs a shell command in your workspace",
        "Writes files",
    ]
    # The turn waits for the user, not the model: no "Waiting for the model" "…" under the
    # card (issue 43 saw a stray "…" there).
    assert page.get_by_label("Waiting for the model").is_hidden()
    shot(page, f"approval-risks-{size}-{scheme}", both_themes=True)
    waiting.get_by_role("button", name="Approve").click()
    page.locator("#transcript .msg-assistant", has_text="It printed ran-in-words.").wait_for()
    ran = page.locator(".tool-card.tool-done", has_text="ran-in-words")
    line = ran.locator("summary")
    assert re.fullmatch(
        r"Ran echo ran-in-words > out\.txt && cat out\.txt\s+\d+\.\d s", line.inner_text().strip()
    )
    assert line.locator("code").inner_text() == command
    assert ran.get_attribute("open") is None
    assert not ran.locator(".tool-output").is_visible()
    line.focus()
    page.keyboard.press("Enter")
    assert ran.locator(".tool-output").is_visible()
    assert ran.locator(".tool-output").inner_text().strip().endswith("ran-in-words")
    ran.scroll_into_view_if_needed()
    shot(page, f"cards-sentence-open-{size}-{scheme}")
    line.click()
    assert ran.get_attribute("open") is None
    live = line.inner_text()
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator(".tool-card.tool-done summary").inner_text() == live

    assert serious_violations(page, "#transcript") == []
    assert page.errors == []


@pytest.fixture(scope="module")
def pages(site):
    """A loopback page server that the site's fetch_page may read (an admin's allow list)."""
    servers = WebServers()
    connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/settings/web-search",
            body=json.dumps({"allowed_hosts": ["127.0.0.1"]}),
            headers={"Content-Type": "application/json", "HX-Request": "true", **site.headers},
        )
        response = connection.getresponse()
        assert response.status == 200, response.read()
    finally:
        connection.close()
    yield servers
    servers.close()


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_three_page_reads_fold_into_one_line(
    open_page_on, site, api, scripted, shot, pages, size, scheme
):
    """Three pages read in one step: one line, "Read 3 pages: 127.0.0.1", that opens (no
    script needed: a details element) to the three cards, each again one sentence."""
    model = f"fold-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model, settings={"tools": ["fetch_page"]})
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    reads = Scenario()
    for n in range(3):
        reads = reads.tool_call("fetch_page", {"url": f"{pages.page_url}/article?n={n}"})
    scripted.enqueue(reads, model=model)
    scripted.enqueue(Scenario().text("Otters hold hands."), model=model)
    send(page, "Read about otters")
    page.locator("#transcript .msg-assistant", has_text="Otters hold hands.").wait_for()
    group = page.locator("#transcript .tool-group")
    group.wait_for()
    line = group.locator("> summary")
    assert line.inner_text().strip() == "Read 3 pages: 127.0.0.1"
    assert group.count() == 1 and group.get_attribute("open") is None
    inner = group.locator(".tool-card")
    assert inner.count() == 3 and not inner.first.is_visible()
    line.scroll_into_view_if_needed()
    shot(page, f"steps-folded-{size}-{scheme}")
    line.click()
    assert [c.is_visible() for c in inner.all()] == [True, True, True]
    assert [t.strip() for t in inner.locator("> summary .tool-sentence").all_inner_texts()] == [
        "Read 127.0.0.1"
    ] * 3
    # Each card within still opens to its result.
    inner.first.locator("> summary").click()
    assert "Otters hold hands" in inner.first.locator(".tool-output").inner_text()
    group.scroll_into_view_if_needed()
    shot(page, f"steps-opened-{size}-{scheme}", both_themes=True)
    # The width of a phone holds the line: it is cut, never wider than the answer.
    box, answer = line.bounding_box(), page.locator("#transcript .msg-step").first.bounding_box()
    assert box["x"] + box["width"] <= answer["x"] + answer["width"] + 1

    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("#transcript .tool-group > summary").inner_text().strip() == (
        "Read 3 pages: 127.0.0.1"
    )
    assert page.locator("#transcript .tool-group .tool-card").count() == 3
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []
