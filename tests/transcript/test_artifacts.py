"""Artifacts (issue 22): which blocks preview, when a streamed block gets its Preview button,
the frame's own policy, and an answer's artifacts across its versions, owner only."""

from __future__ import annotations

import re

import pytest
from import_support import imported_chat

from numi.render.artifacts import MAX_ARTIFACT_BYTES, artifact_kind
from numi.render import StreamRender, artifacts, render_blocks

PREVIEWS = """Here you go.

```html
<p>Hello</p>
```

```svg
<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>
```

```mermaid
graph TD; A-->B
```

```xml
<?xml version="1.0"?>
<!-- drawn by hand -->
<svg xmlns="http://www.w3.org/2000/svg"></svg>
```

```xml
<note>not a drawing</note>
```

```python
print("<b>not an artifact</b>")
```
"""


def _html(blocks) -> str:
    from numi.web.live.fragments import blocks_html

    return str(blocks_html(blocks))


def test_html_svg_mermaid_and_an_svg_xml_block_preview_and_nothing_else(app):
    with app.app_context():
        blocks = [b for b in render_blocks(PREVIEWS) if b.kind == "code"]
        html = _html(blocks)
    assert [b.artifact for b in blocks] == ["html", "svg", "mermaid", "svg", "", ""]
    assert html.count('class="preview-artifact"') == 4
    assert 'aria-label="Preview html artifact"' in html
    assert 'data-artifact="mermaid"' in html
    assert [a.kind for a in artifacts(PREVIEWS)] == ["html", "svg", "mermaid", "svg"]
    assert artifacts(PREVIEWS)[0].code == "<p>Hello</p>\n"


@pytest.mark.parametrize(
    "lang, code, kind",
    [
        ("HTML", "<p>", "html"),
        ("xml", "  <svg>", "svg"),
        ("xml", "<?xml version='1.0'?><!DOCTYPE svg><svg width='1'>", "svg"),
        ("xml", "<svgx/>", ""),
        ("js", "<svg>", ""),
    ],
)
def test_artifact_kinds(lang, code, kind):
    assert artifact_kind(lang, code) == kind


def test_a_block_over_the_limit_is_shown_as_code_with_the_reason(app):
    text = "```html\n" + "<p>x</p>\n" * (MAX_ARTIFACT_BYTES // 9 + 10) + "```\n"
    with app.app_context():
        app.config["NUMI_MARKDOWN_MAX_CHARS"] = len(text) + 10
        (block,) = render_blocks(text)
        html = _html([block])
        listed = artifacts(text)
    assert block.kind == "code" and block.refused == "artifact_too_large"
    assert "preview-artifact" not in html
    assert 'data-code="artifact_too_large"' in html and "Too large to preview" in html
    assert "&lt;p&gt;x&lt;/p&gt;" in re.sub(r"<[^>]+>", "", html), "the code is still shown"
    assert [a.to_dict()["error"]["code"] for a in listed] == ["artifact_too_large"]


def test_a_streamed_block_gets_preview_only_once_its_closing_fence_arrives(app):
    render = StreamRender(cap=100_000)
    text, seen = "", []
    with app.app_context():
        for chunk in ["Look:\n\n```html\n<p>", "Hi</p>\n", "``", "`", "\n\nAfter."]:
            text += chunk
            frame = render.feed(text)
            shown = _html(render.blocks + (frame.open or render.open))
            seen.append("preview-artifact" in shown)
    assert seen == [False, False, False, True, True]


def test_the_frame_has_its_own_policy_and_needs_no_login(multi_app):
    response = multi_app.test_client().get("/artifact-frame")
    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    directives = {d.split()[0]: d.split()[1:] for d in policy.split("; ")}
    assert directives["sandbox"] == ["allow-scripts"], (
        "no same origin, forms, pop-ups or top navigation"
    )
    assert directives["default-src"] == ["'none'"]
    assert directives["style-src"] == ["'unsafe-inline'"]
    assert directives["img-src"] == ["data:"]
    assert directives["form-action"] == ["'none'"]
    (mermaid,) = [s for s in directives["script-src"] if s != "'unsafe-inline'"]
    assert mermaid.startswith("http://localhost/static/vendor/mermaid-") and mermaid.endswith(
        ".min.js"
    )
    assert "connect-src" not in directives, "fetches fall back to default-src 'none'"
    # Issue 34: WebRTC is outside default-src; so are cameras and microphones.
    assert directives["webrtc"] == ["'block'"]
    permissions = dict(
        entry.split("=", 1) for entry in response.headers["Permissions-Policy"].split(", ")
    )
    for feature in ("camera", "microphone", "display-capture", "geolocation", "usb"):
        assert permissions[feature] == "()", feature
    assert response.headers["X-Frame-Options"] == "SAMEORIGIN"
    assert mermaid in response.get_data(as_text=True)
    vendored = multi_app.test_client().get(mermaid.removeprefix("http://localhost"))
    assert vendored.status_code == 200 and b"mermaid" in vendored.data[:100_000]


def test_the_chat_page_never_loads_mermaid(client_a):
    response = client_a.post("/api/session", json={})
    chat_id = response.get_json()["id"]
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "bundle/chat.js" in page and 'id="artifact-panel"' in page
    assert "mermaid" not in page


def _versions_doc(first: str, second: str) -> dict:
    return {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Two drawings"},
        "messages": [
            {"id": 1, "role": "user", "content": "Draw it", "parent_id": None},
            {"id": 2, "role": "assistant", "content": first, "parent_id": 1, "selected": False},
            {"id": 3, "role": "assistant", "content": second, "parent_id": 1, "selected": True},
        ],
    }


def _imported_answer(client, doc: dict) -> tuple[str, int]:
    """Import `doc`: the new chat's id and the id of its last (shown) answer."""
    chat_id = imported_chat(client, doc)["id"]
    history = client.get(f"/api/history/{chat_id}").get_json()
    return chat_id, [m for m in history["messages"] if m["role"] == "assistant"][-1]["id"]


def test_an_answers_artifacts_are_listed_by_version_for_its_owner_only(client_a, client_b):
    doc = _versions_doc("```html\n<p>one</p>\n```\n", "Better:\n\n```html\n<p>two</p>\n```\n")
    chat_id, answer = _imported_answer(client_a, doc)
    listed = client_a.get(f"/c/{chat_id}/messages/{answer}/artifacts")
    assert listed.status_code == 200
    data = listed.get_json()
    assert data["n"] == 2 and data["message_id"] == answer
    assert [v["artifacts"][0]["code"] for v in data["versions"]] == ["<p>one</p>\n", "<p>two</p>\n"]
    # The other version asks for the same list, from its own place.
    other = data["versions"][0]["message_id"]
    assert client_a.get(f"/c/{chat_id}/messages/{other}/artifacts").get_json()["n"] == 1
    assert client_b.get(f"/c/{chat_id}/messages/{answer}/artifacts").status_code == 404
    assert client_a.get(f"/c/{chat_id}/messages/999999/artifacts").status_code == 404


def test_a_long_answers_artifacts_preview_and_are_listed_without_a_markdown_parse(client_a):
    # 100,000 characters up to 1 MB: shown as plain text, not parsed as markdown, and its
    # artifacts still preview and are listed (issue 35).
    filler = "A line of a very long answer, with <b>markup</b> that stays text.\n" * 800
    long_answer = (
        filler
        + "```html\n<p>Late drawing</p>\n```\n"
        + filler
        + "```python\nprint('not an artifact')\n```\n"
        + '  ~~~svg\n  <svg xmlns="http://www.w3.org/2000/svg"></svg>\n  ~~~\n'
        + filler
    )
    assert 100_000 < len(long_answer) < 200_000  # past the cap, within an import's limit
    doc = _versions_doc("short", long_answer)
    chat_id, answer = _imported_answer(client_a, doc)

    listed = client_a.get(f"/c/{chat_id}/messages/{answer}/artifacts").get_json()
    assert listed["versions"][-1]["artifacts"] == [
        {"kind": "html", "lang": "html", "code": "<p>Late drawing</p>\n"},
        {"kind": "svg", "lang": "svg", "code": '<svg xmlns="http://www.w3.org/2000/svg"></svg>\n'},
    ]
    # Up to 1 MB (an answer's size is not bound by the import limit), found alike.
    with client_a.application.app_context():
        huge = filler * 16 + "```mermaid\ngraph TD; A-->B\n```\n"
        assert 800_000 < len(huge) < 1_000_000
        assert [a.kind for a in artifacts(huge)] == ["mermaid"]
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert "Show as markdown" in page, "still shown as plain text"
    assert page.count('class="preview-artifact"') == 2
    assert 'data-artifact="html"' in page and 'data-artifact="svg"' in page
    assert "&lt;p&gt;Late drawing&lt;/p&gt;" in page and "<p>Late drawing</p>" not in page
    assert "&lt;b&gt;markup&lt;/b&gt;" in page and "<b>markup</b>" not in page
