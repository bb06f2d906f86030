"""run_python's outputs that could run script, in real Chromium at desktop and phone sizes:
an SVG carrying <script> and on* handlers is drawn as an image and runs nothing; an HTML
output with script shows sanitised on the card, and Run in the sandbox opens it in the
artifact panel's frame, where its script runs and cannot reach the page, its cookie or the
API. A real ipykernel makes both outputs."""

from __future__ import annotations

import re
import uuid

import pytest
from fixtures import CODE_EXTRA

from numi.testing import Scenario

from page_support import open_chat
from turn_support import Socket, make_chat, of_type

pytestmark = [pytest.mark.browser, CODE_EXTRA]

# Each way an SVG document could run script, each of which would mark the page if it ran.
HOSTILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" '
    "onload=\"top.document.title='svg-ran'\">"
    "<script>top.document.title = 'svg-ran'; parent.svgRan = 1;</script>"
    '<rect width="200" height="100" fill="#2a9d8f" '
    "onmouseover=\"top.document.title='svg-ran'\"/>"
    '<image href="missing.png" width="1" height="1" onerror="top.document.title=\'svg-ran\'"/>'
    "</svg>"
)

PROBE = """<div id="r"><p id="shown">A chart</p></div>
<script>
function note(k, v) {
  var p = document.createElement("p"); p.id = k; p.textContent = v;
  document.getElementById("r").appendChild(p);
}
note("ran", "yes");
try { note("parent", "read " + parent.document.title); } catch (e) { note("parent", "blocked"); }
try { note("cookie", "read " + document.cookie); } catch (e) { note("cookie", "blocked"); }
try { note("storage", "read " + localStorage.length); } catch (e) { note("storage", "blocked"); }
fetch("/api/sessions", {credentials: "include"}).then(
  function (r) { note("fetch", "status " + r.status); },
  function () { note("fetch", "blocked"); });
</script>"""

CODE = f"""from IPython.display import HTML, SVG, display
display(SVG(data={HOSTILE_SVG!r}))
display(HTML({PROBE!r}))
print('both shown')"""

# Chromium's reports of what the sandboxed frame was refused (see test_artifact_panel.py).
FRAME_REPORTS = re.compile(
    r"sandboxed|/artifact-frame|default-src 'none'|Refused to connect because it violates the document's"
    r"|Unrecognized Content-Security-Policy directive 'webrtc'"
)


@pytest.fixture(scope="module")
def made():
    return {}


@pytest.fixture
def code_chat(made, site, api, scripted):
    """One chat whose run drew both outputs, made once for the module (a kernel start
    costs a second or two); the tests look at its saved card."""
    if "chat" not in made:
        model = f"code-{uuid.uuid4().hex[:8]}"
        chat = make_chat(
            api,
            scripted,
            model=model,
            settings={"tools": ["run_python"], "tool_policy": {"run_python": "auto"}},
        )
        scripted.enqueue(Scenario().tool_call("run_python", {"code": CODE}), model=model)
        scripted.enqueue(Scenario().text("Both are on the card."), model=model)
        socket = Socket(site, chat["id"])
        try:
            socket.send(type="send", message="Show me both")
            [end] = [
                e["data"] for e in of_type(socket.events_until("turn_end", timeout=60), "tool_end")
            ]
        finally:
            socket.close()
        assert end["ok"], end
        made["chat"] = chat
    return made["chat"]


def finished_card(page, chat: dict):
    open_chat(page, chat["id"])
    return page.locator(".tool-card.tool-done")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_an_svg_output_is_drawn_as_an_image_and_runs_nothing(
    open_page_on, site, code_chat, shot, size
):
    page = open_page_on(site, size, "light")
    card = finished_card(page, code_chat)
    title = page.title()
    image = card.locator(".code-image img[alt$='(SVG)']")
    image.wait_for()
    image.evaluate("i => i.complete || new Promise(r => i.addEventListener('load', r))")
    assert image.evaluate("i => i.naturalWidth") == 200, "drawn, not a download link"
    image.hover()  # its onmouseover, were it markup
    assert card.locator(".code-outputs svg").count() == 0, "never inline markup"
    # Opened directly, the SVG stays an inert download: its type, but sandboxed.
    response = page.request.get(image.get_attribute("src"))
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert response.headers["content-disposition"].startswith("attachment")
    assert response.headers["content-security-policy"].startswith("sandbox")
    assert response.headers["x-content-type-options"] == "nosniff"
    card.scroll_into_view_if_needed()
    shot(page, f"code-svg-{size}")
    assert page.title() == title and page.evaluate("window.svgRan") is None
    assert page.errors == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_an_html_output_with_script_runs_in_the_sandbox_only(
    open_page_on, site, code_chat, shot, size
):
    page = open_page_on(site, size, "dark")
    card = finished_card(page, code_chat)
    # On the card: the sanitised HTML, its script gone, and the way to run it.
    assert card.locator(".code-html #shown, .code-html p", has_text="A chart").count() == 1
    assert card.locator(".code-html script").count() == 0
    assert page.locator("#ran").count() == 0, "the script did not run on the page"
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    card.get_by_role("button", name="Run output 2 in the sandbox").click()
    panel = page.locator("#artifact-panel")
    panel.wait_for(state="visible")
    frame = page.frame_locator("#artifact-panel iframe")
    frame.locator("#fetch").wait_for()
    notes = {
        k: frame.locator(f"#{k}").inner_text()
        for k in ("ran", "parent", "cookie", "storage", "fetch")
    }
    assert notes == {
        "ran": "yes",
        "parent": "blocked",
        "cookie": "blocked",
        "storage": "blocked",
        "fetch": "blocked",
    }
    assert not [u for u in requests if "/api/sessions" in u], requests
    assert panel.locator("#artifact-versions").is_hidden(), "a tool output has no versions"
    shot(page, f"code-html-sandbox-{size}")
    panel.get_by_role("button", name="Close artifact").click()
    assert panel.is_hidden()
    assert [e for e in page.errors if not FRAME_REPORTS.search(e)] == []
