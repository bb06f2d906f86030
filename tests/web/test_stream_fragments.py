"""The HTML view over a real WebSocket: a long answer goes out block by block (each frame
carries the open block and what just completed, never the whole answer again) and every
id in a frame is one of ours, whatever the model writes."""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser

from numi.testing import Scenario

from turn_support import make_chat

HOSTILE = (
    '<div id="turn-x-open" hx-swap-oob="true">x</div> [a](javascript:alert(1)) $\\href{javascript:x}{y}$\n\n'
    '```js" id="msg-999999-body\n<script>alert(1)</script>\n```\n\n| <b id=a> |\n|:-:|\n| x |\n\n[^<i id=b>]: z\n\n'
)
PLANTED_IDS = {"turn-x-open", "msg-999999-body", "a", "b"}  # the ids the hostile text tries to set


def _frames(ws) -> list[str]:
    frames = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        frames.append(ws.receive(timeout=30))
        if 'data-running="0"' in frames[-1]:
            return frames
    raise AssertionError("the turn did not end")


def test_frames_follow_the_open_block_not_the_whole_answer(server, api, scripted, sockets):
    chat = make_chat(api, scripted)
    paragraphs = [
        f"Paragraph {i} says something **useful** about item {i}, at some length."
        for i in range(300)
    ]
    answer = "\n\n".join(paragraphs)
    scripted.enqueue(Scenario().text(answer, chunks=600).tokens_per_second(1000))
    ws = sockets(chat["id"], html=True)
    ws.send(type="resume", last_event_id=None, last_message_id=0)
    ws.send(type="send", message="Write a lot")
    frames = _frames(ws)
    streamed = [f for f in frames if "-open" in f and 'data-running="0"' not in f]
    assert len(streamed) > 20
    # Every paragraph went out once as a completed block, in order.
    appended = "".join(
        re.findall(
            r'<div hx-swap-oob="beforeend:#turn-[0-9a-f-]+-done">(.*?)</div>',
            "".join(streamed),
            re.S,
        )
    )
    assert [int(n) for n in re.findall(r"<p>Paragraph (\d+) says", appended)] == list(
        range(len(re.findall(r"<p>Paragraph", appended)))
    )
    assert appended.count("<p>Paragraph") >= 250
    # Each completed block is sent once: all frames together weigh about one answer (plus
    # the per-frame wrapping), where re-rendering the whole answer each frame would be
    # quadratic. (A WebSocket message may batch several frames when the client lags.)
    total = sum(len(f) for f in streamed)
    assert total < 2 * len(appended) + 700 * len(streamed), (total, len(appended), len(streamed))
    assert not any('class="md-done" hx-swap-oob="true"' in f for f in streamed), (
        "no block was sent twice"
    )


def test_every_id_in_a_frame_is_ours(server, api, scripted, sockets, xss):
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text(HOSTILE * 3, chunks=90))
    ws = sockets(chat["id"], html=True)
    ws.send(type="resume", last_event_id=None, last_message_id=0)
    ws.send(type="send", message="Be hostile")
    frames = _frames(ws)
    ids = set()

    class Ids(HTMLParser):
        def handle_starttag(self, tag, attrs):
            ids.update(value for name, value in attrs if name == "id")

    for frame in frames:
        Ids(convert_charrefs=True).feed(frame)
        # Nothing active inside message bodies. Ids there are the live part's own (-done,
        # -open: checked below against the ones the text tries to plant); MathML is allowed.
        assert [p for p in xss.page_outline(frame)[1] if p not in ("<div id>", "<math>")] == [], (
            frame
        )
    assert any(i.endswith("-open") for i in ids) and not ids & PLANTED_IDS
    html = "".join(frames)
    assert "<script" not in html and not re.search(r"href=\"\s*javascript", html, re.I)
