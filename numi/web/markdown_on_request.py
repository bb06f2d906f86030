""" "Show as markdown": an answer past NUMI_MARKDOWN_MAX_CHARS rendered on its owner's request,
bounded in size and run one at a time per user.

Such a render is the most CPU one request can ask for (a 198,000-character answer takes most
of a second of pure Python), and it used to have no limit: twelve at once filled every pool
thread and stalled everyone else (issue 34). Now a text longer than
NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS stays plain (413 `markdown_too_long`; its note offers no
button), and while one render of a user runs in this process, another of theirs is refused
with 429 `markdown_busy` (the same answer again is served from the cache, without waiting).
Renders of different users queue in the CPU pool (numi/cpu_pool.py), never in front of a DNS
look-up.
"""

from __future__ import annotations

from flask import current_app
from markupsafe import Markup

from ..errors import NumiError
from ..services import services
from .live.message_render import cached_html, render_and_cache


def can_render_on_request(message) -> bool:
    """Whether the answer is short enough to be rendered as markdown on request."""
    return len(message.content or "") <= current_app.config["NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS"]


def render_on_request(message, user_id: int) -> Markup:
    """The markdown of the saved answer `message` of `user_id`, at any length up to the
    on-request bound: from the cache, or rendered while no other render of theirs runs."""
    limit = current_app.config["NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS"]
    if not can_render_on_request(message):
        raise NumiError(
            "markdown_too_long",
            f"This answer is too long to show as markdown (over {limit:,} characters); "
            "it stays plain text.",
            413,
        )
    cap = len(message.content)
    html = cached_html(message, cap=cap)
    if html is not None:
        return html
    rendering = services().markdown_renders
    if user_id in rendering:
        raise NumiError(
            "markdown_busy",
            "Another answer of yours is being rendered as markdown. Try again in a moment.",
            429,
        )
    rendering.add(user_id)
    try:
        return render_and_cache(message, cap=cap)
    finally:
        rendering.discard(user_id)
