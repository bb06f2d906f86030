"""Compare (issue 22): from the composer, three models answer one question side by side in
lanes (columns at desktop size, swipeable tabs on a phone); one lane is stopped by its own
Stop, the page is reloaded mid-stream and every lane resumes, then "Continue with this" on
the third lane makes its answer the version the chat goes on from. Real Chromium at
1280×800 and 390×844, light and dark."""

from __future__ import annotations

import json
import uuid

import pytest

from numi.testing import Scenario

from page_support import LOOKS, open_chat, serious_violations
from turn_support import make_chat, models_listed

pytestmark = pytest.mark.browser


def chat_with_models(api, scripted, tag: str, models: list[str], **kwargs) -> dict:
    """A chat on an endpoint of its own whose model list is `models` (the picker's rows)."""
    with models_listed(scripted, [{"id": model, "context_length": 32768} for model in models]):
        return make_chat(api, scripted, model=models[0], name=f"compare-{tag}", **kwargs)


def open_compare(page) -> None:
    """Compare is in the composer's "+" menu."""
    page.get_by_title("Attach files, tools, Compare").click()
    page.locator("#compare-picker summary").click()


def send_compare(page, models: list[str], text: str) -> None:
    open_compare(page)
    for model in models:
        page.get_by_role("checkbox", name=model).check()
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_three_lane_compare_streams_stops_resumes_and_continues(
    open_page_on, site, api, scripted, shot, size, scheme
):
    tag = uuid.uuid4().hex[:6]
    models = [f"alpha-{tag}", f"bravo-{tag}", f"charlie-{tag}"]
    chat = chat_with_models(api, scripted, tag, models)
    scripted.enqueue(Scenario().text("Alpha begins ").stall().text("and ends."), model=models[0])
    scripted.enqueue(Scenario().text("Bravo begins ").stall().text("never shown."), model=models[1])
    scripted.enqueue(Scenario().text("Charlie begins ").stall().text("and ends."), model=models[2])

    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    open_compare(page)
    for model in models:
        page.get_by_role("checkbox", name=model).check()
    page.locator("#compare-count", has_text="3").wait_for()
    shot(page, f"compare-picker-{size}-{scheme}")
    page.fill("#composer-input", "Which of you explains it best?")
    page.press("#composer-input", "Enter")

    # Three lanes stream side by side, each labelled with its model.
    lanes = page.locator("#transcript .lane")
    for lane, name in enumerate(("Alpha", "Bravo", "Charlie")):
        lanes.nth(lane).locator(".turn-live", has_text=f"{name} begins").wait_for()
    assert lanes.count() == 3
    assert [lanes.nth(i).locator(".lane-model").inner_text() for i in range(3)] == models
    assert not page.locator("#compare-picker input:checked").count(), "the picker is cleared"
    boxes = [lanes.nth(i).bounding_box() for i in range(3)]
    if size == "desktop":  # columns: side by side, all in view
        assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
        assert abs(boxes[0]["y"] - boxes[2]["y"]) < 2
    else:  # tabs: one lane per screen width, the others a swipe away
        assert boxes[1]["x"] >= boxes[0]["x"] + boxes[0]["width"] - 1
        assert page.locator(".compare-tabs").is_visible()
    shot(page, f"compare-streaming-{size}-{scheme}")

    # The middle lane's own Stop stops it; the others go on.
    lanes.nth(1).get_by_role("button", name=f"Stop {models[1]}").click()
    lanes.nth(1).locator(".lane-state[data-state=stopped]").wait_for()
    assert lanes.nth(0).get_by_role("button", name=f"Stop {models[0]}").is_visible() or (
        size == "phone"
    )
    assert lanes.nth(2).get_by_role("button", name=f"Stop {models[2]}").count() == 1

    # A reload mid-stream: every lane comes back as it was.
    page.reload()
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    lanes = page.locator("#transcript .lane")
    lanes.nth(2).locator(".turn-live", has_text="Charlie begins").wait_for()
    assert lanes.count() == 3
    lanes.nth(0).locator(".turn-live", has_text="Alpha begins").wait_for()
    lanes.nth(1).locator(".msg-body", has_text="Bravo begins").wait_for()
    lanes.nth(1).locator(".lane-state[data-state=stopped]").wait_for()
    shot(page, f"compare-reloaded-{size}-{scheme}")

    # The two lanes still running finish; each lane that answered offers to continue.
    scripted.release()
    lanes.nth(0).locator(".msg-body", has_text="Alpha begins and ends.").wait_for()
    lanes.nth(2).locator(".msg-body", has_text="Charlie begins and ends.").wait_for()
    continue_3 = lanes.nth(2).get_by_role("button", name=f"Continue with this ({models[2]})")
    continue_3.wait_for()
    assert lanes.nth(1).get_by_role("button", name=f"Continue with this ({models[1]})").count()
    assert "Bravo begins never" not in page.locator("#transcript").inner_text()
    if size == "phone":
        page.locator(".compare-tab", has_text=models[2]).click()
        page.locator(".compare-tab[aria-current=true]", has_text=models[2]).wait_for()
    shot(page, f"compare-finished-{size}-{scheme}", both_themes=True)
    assert serious_violations(page, "#transcript") == []

    # Continue with the third lane: its answer is the version shown, ‹ n/3 ›, and the chat
    # goes on from it.
    continue_3.click()
    page.locator("#transcript .lane").first.wait_for(state="detached")
    answer = page.locator("#transcript .msg-assistant", has_text="Charlie begins and ends.")
    answer.wait_for()
    assert answer.locator(".version-count").inner_text().endswith("/3")
    assert page.locator("#transcript .msg-assistant").count() == 1
    scripted.enqueue(Scenario().text("Following on from Charlie."), model=models[0])
    page.fill("#composer-input", "Go on")
    page.press("#composer-input", "Enter")
    page.locator("#transcript .msg-assistant", has_text="Following on from Charlie.").wait_for()
    sent = json.dumps(scripted.requests[-1].body["messages"])
    assert "Charlie begins and ends." in sent and "Alpha begins" not in sent
    shot(page, f"compare-continued-{size}-{scheme}")
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_each_lane_asks_for_its_tool_on_its_own_card(
    open_page_on, site, api, scripted, shot, size, scheme
):
    tag = uuid.uuid4().hex[:6]
    models = [f"left-{tag}", f"right-{tag}"]
    chat = chat_with_models(api, scripted, tag, models, settings={"tools": ["guarded"]})
    for model in models:
        scripted.enqueue(
            Scenario().tool_call("guarded", {"label": f"asked by {model}"}),
            Scenario().text(f"{model} is done."),
            model=model,
        )
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    send_compare(page, models, "Use the tool, both of you")
    lanes = page.locator("#transcript .lane")
    cards = [lanes.nth(i).locator(".tool-card.tool-approval") for i in range(2)]
    for lane, card in enumerate(cards):
        card.wait_for()
        assert f"asked by {models[lane]}" in card.inner_text()
        assert card.count() == 1, "one card per lane, in its own lane"
    shot(page, f"compare-approvals-{size}-{scheme}")
    assert serious_violations(page, "#transcript") == []
    cards[1].get_by_role("button", name="Deny").click()
    lanes.nth(1).locator(".tool-card.tool-denied", has_text="Denied").wait_for()
    cards[0].get_by_role("button", name="Approve").click()
    lanes.nth(0).locator(".tool-card.tool-done").wait_for()
    for lane, model in enumerate(models):
        lanes.nth(lane).locator(".msg-body", has_text=f"{model} is done.").wait_for()
        lanes.nth(lane).get_by_role("button", name=f"Continue with this ({model})").wait_for()
    shot(page, f"compare-approvals-done-{size}-{scheme}")
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_compare_picker_filters_models_by_typing(
    open_page_on, site, api, scripted, shot, size, scheme
):
    tag = uuid.uuid4().hex[:6]
    models = [f"{name}-{tag}" for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
    chat = chat_with_models(api, scripted, tag, models)
    page = open_page_on(site, size, scheme)
    open_chat(page, chat["id"])
    open_compare(page)
    picker = page.locator("#compare-picker")
    search = picker.get_by_role("searchbox", name="Search models to compare")
    if size == "desktop":  # a keyboard: the search has the focus as the picker opens
        assert search.evaluate("el => el === document.activeElement")
    search.click()
    page.keyboard.type(f"bra {tag}")  # the server's other tests' models are listed too
    visible = picker.locator(".compare-route:visible")
    visible.filter(has_text=models[1]).wait_for()
    assert visible.count() == 1
    # Enter ticks the first match and sends nothing; the ticked route stays in view.
    page.keyboard.press("Enter")
    assert picker.get_by_role("checkbox", name=models[1]).is_checked()
    page.locator("#compare-count", has_text="1").wait_for()
    search.fill("")
    page.keyboard.type(f"cho {tag}")  # words of the model's name and its endpoint's
    picker.locator(".compare-route:visible", has_text=models[4]).wait_for()
    assert sorted(visible.all_inner_texts()) == sorted(
        picker.locator(".compare-route", has_text=name).inner_text() for name in models[1::3]
    )
    shot(page, f"compare-search-{size}-{scheme}", both_themes=True)
    assert serious_violations(page, "#compare-picker") == []
    search.fill(f"zzqx {tag}")
    picker.get_by_text("No model matches.").wait_for()
    # Esc clears the search (the picker stays open), then closes the picker.
    page.keyboard.press("Escape")
    assert search.input_value() == ""
    assert visible.count() >= len(models)
    page.keyboard.press("Escape")
    search.wait_for(state="hidden")
    assert page.locator("#transcript .msg-user").count() == 0
    assert page.errors == []
