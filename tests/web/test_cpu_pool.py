"""CPU work has a pool of its own (issue 34): markdown renders no longer take the threads of
gevent's pool, which also resolves host names, so a burst of renders never queues another
user's DNS look-up (and with it their turn) behind them. Order, not seconds: the look-up
started after the renders is answered before the first of them ends."""

from __future__ import annotations

import gevent
import gevent.socket

from numi.web.live.message_render import OFF_HUB_CHARS, render_html

PARAGRAPH = "Some **bold** text with `code` and *emphasis*.\n\n- item one\n- item _two_\n\n"
# Past the off-hub threshold: each render is handed to a pool thread.
LONG = (PARAGRAPH * (2 * OFF_HUB_CHARS // len(PARAGRAPH) + 1))[: 2 * OFF_HUB_CHARS]
# More renders than gevent's pool has threads (10), as in the review's twelve requests.
RENDERS = 12


def test_a_dns_look_up_is_not_queued_behind_markdown_renders():
    finished: list[str] = []
    started = []

    def render(n: int):
        started.append(n)
        html = render_html(f"{LONG}\n\nanswer {n}", None, cap=10 * len(LONG))
        assert "<strong>bold</strong>" in html
        finished.append("render")

    def look_up():
        # What a provider request or a fetched page does first (gevent's thread resolver).
        assert gevent.socket.getaddrinfo("localhost", 80)
        finished.append("dns")

    renders = [gevent.spawn(render, n) for n in range(RENDERS)]
    while len(started) < RENDERS:  # every render has been handed to a pool
        gevent.sleep(0)
    dns = gevent.spawn(look_up)
    gevent.joinall([*renders, dns], raise_error=True, timeout=120)
    assert len(finished) == RENDERS + 1, finished
    assert finished.index("dns") == 0, f"the look-up waited for renders: {finished}"
