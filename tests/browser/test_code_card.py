"""run_python's card as a person sees it, in real Chromium at desktop and phone sizes: the
whole code highlighted while it waits for approval, then what it printed, its picture (drawn,
not a path), its value and its file; the picture again after a reload, at both sizes. A real
ipykernel runs the code (its DataFrame tables are tested in tests/tools/test_tools_code.py)."""

from __future__ import annotations

import uuid

import pytest
from fixtures import CODE_EXTRA

from numi.testing import Scenario

from page_support import open_chat, send, serious_violations
from turn_support import make_chat

pytestmark = [pytest.mark.browser, CODE_EXTRA]

CODE = """import io
from PIL import Image as Picture
from IPython.display import Image, display
print('drawing a picture')
buffer = io.BytesIO()
Picture.new('RGB', (240, 120), (200, 60, 40)).save(buffer, 'PNG')
display(Image(buffer.getvalue()))
open('summary.txt', 'w').write('done')
{'city': ['Lyon', 'Oslo'], 'rain_mm': [831, 763]}"""


def drawn_image(card) -> dict:
    """The card's output picture as the browser has it (its natural and shown widths)."""
    image = card.locator(".code-image img")
    image.wait_for()
    image.evaluate("i => i.complete || new Promise(r => i.addEventListener('load', r))")
    return image.evaluate(
        "i => ({natural: i.naturalWidth, shown: i.getBoundingClientRect().width})"
    )


def test_code_card_shows_the_picture_live_and_after_reload(open_page_on, site, api, scripted, shot):
    model = f"code-{uuid.uuid4().hex[:8]}"
    chat = make_chat(api, scripted, model=model, settings={"tools": ["run_python"]})
    scripted.enqueue(Scenario().tool_call("run_python", {"code": CODE}), model=model)
    scripted.enqueue(Scenario().text("Here is the picture."), model=model)
    page = open_page_on(site, "desktop", "light")
    open_chat(page, chat["id"])
    assert page.locator(".kernel-restart").is_visible()
    send(page, "Draw something")

    waiting = page.locator(".tool-card.tool-approval")
    waiting.get_by_role("button", name="Approve").wait_for()
    code = waiting.locator(".code-source pre.code")
    assert code.inner_text().strip() == CODE
    assert code.locator("span[class^=hl-]").count() > 5, "the code is highlighted"
    shot(page, "code-approval-desktop-light")
    waiting.get_by_role("button", name="Approve").click()

    done = page.locator(".tool-card.tool-done")
    page.locator("#transcript .msg-assistant", has_text="Here is the picture.").wait_for(
        timeout=60000
    )
    assert drawn_image(done)["natural"] == 240
    assert "drawing a picture" in done.locator(".code-stdout").inner_text()
    assert done.locator(".code-result", has_text="Lyon").count() == 1
    assert done.locator(".code-files a", has_text="summary.txt").count() == 1
    done.scroll_into_view_if_needed()
    shot(page, "code-done-desktop-light")
    assert serious_violations(page, "#transcript") == []
    assert page.errors == []

    # Reloaded, at both sizes: the saved card draws the same picture.
    for size, scheme in (("desktop", "light"), ("phone", "dark")):
        page = open_page_on(site, size, scheme)
        open_chat(page, chat["id"])
        reloaded = page.locator(".tool-card.tool-done")
        image = drawn_image(reloaded)
        assert image["natural"] == 240 and 0 < image["shown"] <= 240
        assert reloaded.locator(".code-files a", has_text="summary.txt").count() == 1
        reloaded.scroll_into_view_if_needed()
        shot(page, f"code-reloaded-{size}-{scheme}", both_themes=True)
        assert page.errors == []
