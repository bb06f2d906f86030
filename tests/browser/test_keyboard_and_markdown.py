"""The keyboard and what answers look like, in real headless Chromium at 1280×800 and
390×844, light and dark: one tab stop per chat in the sidebar (its actions with → and ←),
the "?" dialog over a backdrop, wide code and formulas that a keyboard can scroll (axe's
scrollable-region-focusable), footnote references that lead to their note and back, and
math typeset as TeX would (limits under ∑ in display, a large ∫)."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario

from page_support import LOOKS, reveal_sidebar
from turn_support import make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

ANSWER = (
    r"""Short code:

```python
print("hi")
```

Wide code:

```python
values = ["""
    + ", ".join(str(n) for n in range(80))
    + r"""]
```

Euler said so[^1], and Gauss too[^gauss].

$$
\sum_{k=1}^{n} k = \frac{n(n+1)}{2} \qquad \int_0^1 \frac{x^2}{1+x^2}\,dx \qquad \lim_{x \to 0} \frac{\sin x}{x} = 1
$$

Inline: $\sum_{k=1}^{n} k$ and $\int_0^1 x\,dx$.

$$
"""
    + " + ".join(f"a_{{{n}}}" for n in range(21))
    + r"""
$$

[^1]: Leonhard Euler, in a letter.

[^gauss]: As a schoolboy, the story goes.
"""
)


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_one_tab_stop_per_sidebar_chat_and_arrows_reach_its_actions(
    open_page_on, site, api, size, scheme, shot
):
    mark = uuid.uuid4().hex[:6]
    ids = []
    for name in ("Oldest", "Middle", "Newest"):
        status, chat = api.post("/api/session", {"title": f"{name} {mark}"})
        assert status == 201
        ids.append(chat["id"])
    oldest, middle, newest = ids
    page = open_page_on(site, size, scheme, "/")
    reveal_sidebar(page, size)
    link = {chat_id: page.locator(f"#chat-{chat_id} .chat-link") for chat_id in ids}

    # Tab goes from chat to chat: the row's "…" is not a tab stop.
    link[newest].focus()
    page.keyboard.press("Tab")
    expect(link[middle]).to_be_focused()
    page.keyboard.press("Tab")
    expect(link[oldest]).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(link[middle]).to_be_focused()
    # ↑ and ↓ move between chats too.
    page.keyboard.press("ArrowUp")
    expect(link[newest]).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(link[middle]).to_be_focused()

    # → reaches the focused chat's "…" (shown while it has the focus), ← comes back.
    row = page.locator(f"#chat-{middle}")
    more = row.locator(".row-menu-button")
    page.keyboard.press("ArrowRight")
    expect(more).to_be_focused()
    expect(more).to_be_visible()
    page.keyboard.press("ArrowLeft")
    expect(link[middle]).to_be_focused()

    # Enter opens the menu and goes to its first item; ↓ and ↑ walk the items; Esc closes it
    # and the focus goes back to the "…".
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    rename = row.get_by_role("button", name="Rename")
    expect(rename).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(row.get_by_role("button", name="Pin")).to_be_focused()
    shot(page, f"sidebar-actions-by-keyboard-{size}-{scheme}")
    page.keyboard.press("ArrowUp")
    expect(rename).to_be_focused()
    page.keyboard.press("Escape")
    expect(more).to_be_focused()
    expect(rename).to_be_hidden()

    # An action works from the keyboard: Rename opens its field, Esc puts the row back.
    page.keyboard.press("Enter")
    expect(rename).to_be_focused()
    page.keyboard.press("Enter")
    field = page.locator(f"#chat-{middle} input[name=title]")
    expect(field).to_be_focused()
    page.keyboard.press("Escape")
    # The row comes back from the server (Cancel's request): a busy machine takes its time.
    expect(page.locator(f"#chat-{middle} .chat-link")).to_be_focused(timeout=WAIT_SECONDS * 1000)
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_the_shortcuts_dialog_has_a_backdrop(open_page_on, site, size, scheme, shot):
    page = open_page_on(site, size, scheme, "/")
    page.locator("body").press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    backdrop = page.evaluate(
        "getComputedStyle(document.getElementById('shortcuts-dialog'), '::backdrop').backgroundColor"
    )
    # Dimmed: a dark veil that lets the page show through.
    red, green, blue, alpha = (float(x) for x in backdrop[5:-1].split(","))
    assert max(red, green, blue) <= 20 and 0.4 <= alpha < 1, backdrop
    shot(page, f"shortcuts-dialog-{size}-{scheme}")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_wide_blocks_scroll_by_keyboard_footnotes_link_and_math_is_typeset(
    open_page_on, site, api, scripted, size, scheme, shot
):
    from page_support import serious_violations

    model = f"md-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model)
    scripted.enqueue(Scenario().text(ANSWER, chunks=20), model=model)
    page = open_page_on(site, size, scheme, f"/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "Show me code, notes and maths")
    page.press("#composer-input", "Enter")
    answer = page.locator("article.msg-assistant .msg-body").last
    answer.locator(".footnote").nth(1).wait_for()
    page.locator("#send-button").wait_for()

    # The wide code block and the wide formula take the focus, with a name; the short one not.
    short, wide = answer.locator("pre.code").nth(0), answer.locator("pre.code").nth(1)
    expect(wide).to_have_attribute("tabindex", "0")
    expect(page.get_by_role("group", name="python, scrolls sideways")).to_have_count(1)
    expect(short).not_to_have_attribute("tabindex", "0")
    wide_formula = answer.locator(".math-block").nth(1)
    expect(wide_formula).to_have_attribute("tabindex", "0")
    expect(wide_formula).to_have_attribute("aria-label", "Formula, scrolls sideways")
    wide.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(el) => el.scrollLeft > 0", arg=wide.element_handle())
    assert serious_violations(page) == []

    # Math: limits under and over ∑ when displayed, beside it inline; a large ∫ displayed.
    shown = answer.locator(".math-block").first
    shown.scroll_into_view_if_needed()
    shot(shown, f"math-{size}-{scheme}")
    shot(answer.locator("p", has_text="Inline:"), f"math-inline-{size}-{scheme}")
    boxes = shown.locator("munderover").first.evaluate(
        "(el) => [...el.children].map((c) => c.getBoundingClientRect().toJSON())"
    )
    sigma, below, above = boxes
    assert below["top"] >= sigma["bottom"] - 2 and above["bottom"] <= sigma["top"] + 2
    inline = (
        answer.locator("p math")
        .first.locator("munderover")
        .evaluate("(el) => [...el.children].map((c) => c.getBoundingClientRect().toJSON())")
    )
    assert inline[1]["left"] >= inline[0]["right"] - 1, "inline, the limits sit beside ∑"
    displayed_integral = shown.locator("mo", has_text="∫").bounding_box()
    inline_integral = answer.locator("p math mo", has_text="∫").bounding_box()
    assert displayed_integral["height"] > 1.3 * inline_integral["height"], (
        displayed_integral,
        inline_integral,
    )

    # Footnotes: [1] leads to its note, and the note's ↩ back to [1].
    reference = answer.get_by_role("link", name="[1]")
    reference.click()
    note = answer.locator(".footnote").first
    expect(note).to_be_focused()
    expect(note).to_be_in_viewport()
    shot(page, f"footnote-{size}-{scheme}")
    note.get_by_role("link", name="back to the text").click()
    expect(reference).to_be_focused()
    expect(reference).to_be_in_viewport()
    answer.get_by_role("link", name="[gauss]").click()
    expect(answer.locator(".footnote").nth(1)).to_be_focused()
    assert page.url.endswith(f"/c/{chat['id']}"), "the page stays, no new tab"
    assert len(page.context.pages) == 1
    assert page.errors == []
