"""Real Chromium: a long markdown answer streams without moving text already shown, ends
exactly as a reload shows it, and its code blocks and messages copy to the clipboard.

Run at 1280x800 and 390x844, light and dark. The streaming test records, at every
animation frame, the top of each block of the answer (relative to the question above it)
and fails if any block that has been shown ever moves, including when the saved message
replaces the streamed one.
"""

from __future__ import annotations

import re


import pytest

from numi.testing import Scenario

from turn_support import Api, make_chat, turn_server_env
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser


# Both sizes and both schemes in two runs (see page_support.LOOKS).
VIEWS = [
    pytest.param({"width": 1280, "height": 800}, "light", id="desktop-light"),
    pytest.param({"width": 390, "height": 844}, "dark", id="phone-dark"),
]

# At every frame: the top of each block of the last answer, relative to the last question.
RECORDER = """
(() => {
  const firstTop = new Map();
  window.__moves = [];
  window.__frames = 0;
  window.__maxBlocks = 0;
  function blocks(body) {
    return body.querySelectorAll(
      ':scope > :not(.md-done):not(.md-open), :scope > .md-done > *, :scope > .md-open > *');
  }
  function measure() {
    const questions = document.querySelectorAll('#transcript .msg-user');
    const bodies = document.querySelectorAll('#transcript .msg-assistant .msg-body');
    if (questions.length && bodies.length) {
      const origin = questions[questions.length - 1].getBoundingClientRect().top;
      const list = blocks(bodies[bodies.length - 1]);
      window.__frames += 1;
      window.__maxBlocks = Math.max(window.__maxBlocks, list.length);
      list.forEach((block, index) => {
        const top = block.getBoundingClientRect().top - origin;
        if (!firstTop.has(index)) firstTop.set(index, top);
        else if (Math.abs(firstTop.get(index) - top) > 0.5) {
          window.__moves.push({index, from: firstTop.get(index), to: top, frame: window.__frames,
                               text: block.textContent.slice(0, 40)});
          firstTop.set(index, top);
        }
      });
    }
    requestAnimationFrame(measure);
  }
  requestAnimationFrame(measure);
})();
"""


def _answer() -> str:
    parts = []
    for i in range(1, 7):
        parts.append(f"""## Part {i}: what the numbers say

This paragraph explains part {i} in plain words, with **bold claims**, `inline_code({i})`, a bare link
https://example.org/part/{i} and inline math $x_{i}^2 + y = {i}$. It runs long enough to wrap over several
lines on a phone, so that a word being written at the end of a line moves to the next one while the
lines above it stay exactly where they are; a reader should never see the text jump. Here is a long
unbroken token: {"abcdefghij" * 8}{i} that has to wrap inside the column.

- First point of part {i}, with a few words more
- Second point, which is a little longer than the first one and wraps
  onto a continuation line
- Third point with `code` and *emphasis*

```python
def part_{i}(values):
    # Sum the squares of the values, scaled by the part number.
    total = sum(v * v for v in values)
    return total * {i} + len("{"x" * 60}")
```

| Name | Value | Note |
|:-----|------:|:----:|
| alpha{i} | {i}.50 | left |
| beta{i} | {i * 20} | centre |
| gamma{i} | {i * 300} | right |

$$
\\int_0^{{{i}}} x^2 \\, dx = \\frac{{{i}^3}}{{3}}
$$

Then a closing paragraph for part {i}: the table and the formula above have rendered, and the next part
follows after this sentence.
""")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def stream_server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def _open(browser, server, viewport, scheme, errors, **options):
    page = server.open_page(browser, viewport=viewport, color_scheme=scheme, **options)
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page


@pytest.mark.parametrize("viewport,scheme", VIEWS)
def test_streamed_text_never_moves_and_ends_as_a_reload_shows_it(
    browser, scripted, stream_server, viewport, scheme, shot
):
    api = Api(stream_server.url)
    chat = make_chat(api, scripted)
    answer = _answer()
    assert 7000 < len(answer) < 11000  # about 2,000 tokens
    scripted.enqueue(Scenario().text(answer, chunks=400).delay(0.02))
    errors: list[str] = []
    page = _open(browser, stream_server, viewport, scheme, errors)
    page.add_init_script(RECORDER)
    page.goto(f"{stream_server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "Explain the numbers")
    page.press("#composer-input", "Enter")

    # Mid-stream: rendered markdown (not raw text) is already on the page.
    page.wait_for_selector(".turn-live .msg-body table", timeout=WAIT_SECONDS * 1000)
    page.wait_for_selector(".turn-live .msg-body math")
    shot(page, f"stream-mid-{viewport['width']}-{scheme}")
    page.wait_for_selector("#send-button", timeout=60000)
    saved = api.history(chat["id"])[-1]
    assert saved["role"] == "assistant" and saved["content"] == answer
    body = page.locator(f"#msg-{saved['id']}-body")
    body.wait_for()
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    moves = page.evaluate("window.__moves")
    frames = page.evaluate("window.__frames")
    assert frames > 100, "the recorder saw the answer grow frame by frame"
    assert page.evaluate("window.__maxBlocks") >= 6 * 7
    assert moves == [], f"text already shown moved: {moves[:5]}"

    # Everything rendered: six tables, formulas as MathML, code with a label and Copy.
    assert body.locator("table").count() == 6 and body.locator("math[display=block]").count() == 6
    assert body.locator(".code-block .code-lang").first.inner_text() == "python"
    assert body.locator(".code-block button.copy-code").count() == 6
    assert body.locator("h4").first.inner_text() == "Part 1: what the numbers say"
    assert body.locator("a[href='https://example.org/part/1']").get_attribute("target") == "_blank"
    assert body.locator("th.align-right").count() == 6
    # The long token wraps inside the column; code scrolls instead of widening the page.
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    pre = body.locator("pre").first
    assert pre.evaluate("el => getComputedStyle(el).overflowX") == "auto"
    shot(page, f"stream-end-{viewport['width']}-{scheme}")

    # The message as streamed and as a reload renders it.
    streamed = page.locator(f"#msg-{saved['id']}").evaluate("el => el.outerHTML")
    page.reload()
    page.wait_for_selector(f"#msg-{saved['id']}-body")
    reloaded = page.locator(f"#msg-{saved['id']}").evaluate("el => el.outerHTML")

    # An empty style attribute changes nothing a person sees: htmx's settling of the swapped
    # actions leaves one on the live page's hidden input. The model pickers' shared listbox
    # (an inert <template>) rides with the first picker of each render: on a reload that may
    # be this answer's Regenerate, live it came with the page.
    def seen(html: str) -> str:
        html = re.sub(r'<template id="picker-list-[0-9a-f]+">.*?</template>', "", html, flags=re.S)
        return html.replace(' style=""', "")

    assert seen(streamed) == seen(reloaded)
    assert "Part 6" in reloaded and reloaded.count("<table") == 6
    assert [e for e in errors if "WebSocket" not in e] == []
    page.close()


@pytest.mark.parametrize("viewport,scheme", VIEWS)
def test_copy_code_and_message_to_the_clipboard(
    browser, scripted, stream_server, viewport, scheme, shot
):
    api = Api(stream_server.url)
    chat = make_chat(api, scripted)
    answer = "Run this:\n\n```bash\necho 'hello <world>' && ls -la\n```\n\nThen check $a^2$."
    scripted.enqueue(Scenario().text(answer, chunks=3))
    errors: list[str] = []
    page = _open(
        browser,
        stream_server,
        viewport,
        scheme,
        errors,
        permissions=["clipboard-read", "clipboard-write"],
    )
    page.goto(f"{stream_server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "How do I list files?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("article.msg-assistant .copy-message")
    saved = api.history(chat["id"])[-1]
    assert saved["role"] == "assistant"
    article = page.locator(f"#msg-{saved['id']}")
    article.wait_for()

    # The code block's Copy, reached and pressed with the keyboard.
    button = article.locator("button.copy-code")
    assert button.get_attribute("aria-label") == "Copy bash code"
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('button.copy-code').textContent === 'Copied'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == "echo 'hello <world>' && ls -la\n"

    # The message's Copy gives its markdown source, not the rendered text.
    article.locator("button.copy-message").click()
    page.wait_for_function(
        f"() => document.querySelector('#msg-{saved['id']} .copy-message').textContent === 'Copied'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == answer
    shot(page, f"copy-{viewport['width']}-{scheme}")
    assert [e for e in errors if "WebSocket" not in e] == []
    page.close()
