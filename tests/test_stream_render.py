"""The HTML view's open block (issue 27): streamed frames add up to exactly the full render,
and the cheaper bare-URL pre-checks answer as linkify-it does."""

from __future__ import annotations

import random

import linkify_it
import pytest

from numi.render import StreamRender, render_blocks
from numi.render.markdown import parser
from numi.web.live.fragments import blocks_html, frame_html

# Pieces of answers: prose with and without full stops, bare URLs of every kind linkify-it
# knows (schemes, protocol-relative, fuzzy hosts, IPs, e-mail), escapes and entities that
# become "." or ":" only after parsing, and the block kinds whose ends a later line decides.
PIECES = [
    "Plain words with no stop or colon ",
    "A sentence. Another one, with a comma. ",
    "see https://example.org/docs?q=1 for more ",
    "mail me at someone@example.com today ",
    "and //localhost/path too ",
    "or www.example.com, or example.co.uk. ",
    "the host is localhost and the IP 192.168.1.1 ",
    "a@b example&#46;com then example\\.org ",
    "LOCALHOST:8080 and ſome KELVIN ",
    "`code http://not.a.link` and [a link](https://e.org) ",
    "**bold https://bold.example** and _em_ ",
    "\n",
    "\n\n",
    "- item http://x.org\n",
    "1. first\n",
    "```python\nprint('http://x.org')\n```\n",
    "```html\n<p>Hi</p>\n```\n",
    '```svg\n<svg xmlns="http://www.w3.org/2000/svg"></svg>\n```\n',
    "| a | b |\n|---|---|\n| http://t.org | 2 |\n",
    "Title\n---\n",
    "$$\nx^2\n$$\n",
    "> quoted www.q.org\n",
    "[r]: https://e.org/r\n",
    "see [r] now\n",
]


def _document(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(4, 18)))


def _cuts(rng: random.Random, length: int) -> list[int]:
    cuts, at = [], 0
    while at < length:
        at = min(length, at + rng.choice([1, 1, 2, 3, 5, 8, 20, 60]))
        cuts.append(at)
    return cuts


def _streamed_page(text: str, cuts: list[int]) -> str:
    """What the page shows after applying every frame as the HTML view sends it: completed
    blocks appended to (or, on reset, replacing) the done part, the open part replaced."""
    render, done, open_html = StreamRender(cap=100_000), "", ""
    for cut in cuts:
        frame = render.feed(text[:cut])
        assert frame_html("t", "", frame) or not (frame.completed or frame.reset)
        completed = str(blocks_html(frame.completed))
        done = completed if frame.reset else done + completed
        if frame.open is not None:
            open_html = str(blocks_html(frame.open))
    return done + open_html


@pytest.mark.parametrize("seed", range(8))
def test_streamed_frames_add_up_to_the_full_render(seed):
    rng = random.Random(seed)
    for _ in range(25):
        text = _document(rng)
        cuts = _cuts(rng, len(text))
        assert _streamed_page(text, cuts) == str(blocks_html(render_blocks(text))), repr(text)


def test_a_closed_block_of_the_open_tail_is_not_rendered_again():
    render = StreamRender(cap=100_000)
    render.feed("First paragraph, https://example.org.\n\nSecond")
    before = render.open[0]
    frame = render.feed("First paragraph, https://example.org.\n\nSecond and more")
    # The first paragraph stays in the tail until the second's line is finished, but it
    # can no longer change: the same rendered block is sent again.
    assert frame.open[0] is before and "More" not in before.html
    assert 'href="https://example.org"' in before.html


def test_the_bare_url_pre_checks_answer_as_linkify_it():
    ours, theirs = parser().linkify, linkify_it.LinkifyIt()
    parts = [
        "localhost", "LOCALHOST", "www", "www.", "a", "@", "/", "//", "http", "https",
        "mailto", ":", ".", "1", "127", "example", "com", "。", "．", "：", "ſ", "K",
        "xn--", "рф", " ", "\n", "(", "<", "_", "-", "&#46;",
    ]  # fmt: skip
    rng = random.Random(3)
    for _ in range(20_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 10)))
        assert ours.pretest(text) == theirs.pretest(text), repr(text)
        assert ours.test(text) == theirs.test(text), repr(text)
