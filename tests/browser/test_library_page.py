"""The Library (issue 37) in real headless Chromium, desktop and phone: every document with its
project and state, a search whose passages say where and why they were found, Re-index and
Delete; a chat's context panel listing the passages its next request carries, one of which
can be left out and brought back; and an answer's citation opening its passage in the side
panel. axe-core finds no serious problem; screenshots are saved under tmp_path."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS, wrapped_texts
from turn_support import make_chat, run_turn, upload_attachment, wait_until

pytestmark = pytest.mark.browser

GUIDE = b"""# Bread guide

## Proofing

Let the dough rise until doubled, about ninety minutes at room temperature.
"""


@pytest.fixture(scope="module")
def bread_project(site):
    """A project "Bakery" whose file is the bread guide, indexed by words and meaning."""
    from turn_support import Api

    api = Api(site.url, token=site.token)
    _, project = api.post("/api/projects", {"name": "Bakery"})
    attachment_id = upload_attachment(site.url, "bread.md", GUIDE, "text/markdown")
    api.post(f"/api/projects/{project['id']}/files", {"attachment_id": attachment_id})

    def indexed():
        documents = api.get("/api/documents")[1]["documents"]
        return all(d["status"] == "done" and d["vectors"] == "done" for d in documents) or None

    wait_until(indexed, timeout=60, what="the guide to be indexed")
    return project


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_library_lists_searches_and_reindexes(open_page, bread_project, shot, size):
    page = open_page(size, "light", "/library")
    row = page.locator(".library-document", has_text="bread.md")
    expect(row).to_contain_text("Bakery")
    expect(row).to_contain_text("by meaning too")
    page.locator("#library-q").fill("how long should dough rise")
    page.locator(".library-search button").click()
    best = page.locator(".library-passage").first
    expect(best).to_contain_text("bread.md › Bread guide › Proofing")
    expect(best).to_contain_text("same words and similar meaning")
    expect(best).to_contain_text("ninety minutes")
    # The fused score reads as words; its number stays in the tooltip (issue 43).
    expect(best.locator(".passage-why")).to_have_text("same words and similar meaning · best match")
    expect(best.locator(".passage-why")).to_have_attribute(
        "title", re.compile(r"^Fused score 0\.\d{4}$")
    )
    if size == "desktop":  # a document's actions on one row, its size on one line
        row = page.locator(".library-document", has_text="bread.md")
        tops = {round(b.bounding_box()["y"]) for b in row.locator("button").all()}
        assert len(tops) == 1, tops
        assert wrapped_texts(row.locator("td:not(.document-actions)")) == []
    shot(page, f"library-{size}")
    from page_support import serious_violations

    assert serious_violations(page) == []
    page.locator(".library-document", has_text="bread.md").get_by_role(
        "button", name="Re-index bread.md"
    ).click()
    expect(page.locator(".library-document", has_text="bread.md")).to_be_visible()

    page.goto(page.url.split("/library")[0] + "/settings/documents")
    expect(page.locator("#documents-search-mode")).to_contain_text("Words and meaning")
    expect(page.locator("#documents-embedding select")).to_have_value("local")
    expect(page.locator(".document", has_text="bread.md")).to_contain_text("by meaning")
    shot(page, f"settings-documents-{size}")
    assert page.errors == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_context_panel_shows_the_passages_of_the_next_request(
    open_page, site, api, scripted, bread_project, shot, size
):
    chat = make_chat(api, scripted)
    api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": bread_project["id"]})
    scripted.enqueue(Scenario().text("About ninety minutes [1]."))
    run_turn(site, chat["id"], "How long does the dough need to rise?", timeout=60)
    page = open_page(size, "light", f"/c/{chat['id']}")
    page.locator("#context-gauge .gauge-button").click()
    part = page.locator('.context-part[data-kind="documents"]')
    expect(part).to_contain_text("Document passages")
    part.locator("summary").click()
    passage = part.locator(".context-passage").first
    expect(passage).to_contain_text("bread.md › Bread guide › Proofing")
    expect(passage).to_contain_text("similar meaning")
    expect(passage.locator(".passage-why")).to_contain_text("best match")
    shot(page, f"context-passages-{size}")
    assert page.errors == []


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_a_citation_opens_its_passage_and_a_passage_can_be_left_out(
    open_page, site, api, scripted, bread_project, shot, size, scheme
):
    chat = make_chat(api, scripted)
    api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": bread_project["id"]})
    scripted.enqueue(Scenario().text("Let it rise for about ninety minutes [1]."))
    run_turn(site, chat["id"], "How long does the dough need to rise?", timeout=60)
    page = open_page(size, scheme, f"/c/{chat['id']}")
    answer = page.locator(".msg-assistant").last
    answer.locator(".md a", has_text="[1]").click()
    panel = page.locator("#passage-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".passage-title")).to_contain_text("bread.md")
    expect(panel.locator(".passage-where")).to_contain_text("Bread guide › Proofing")
    expect(panel.locator("mark.passage-mark")).to_contain_text("ninety minutes")
    shot(page, f"citation-passage-{size}-{scheme}", both_themes=True)
    from page_support import serious_violations

    assert serious_violations(page) == []
    panel.get_by_role("button", name="Close the passage").click()
    expect(panel).to_be_hidden()
    answer.locator(".sources-list summary").click()
    answer.locator(".sources-list a.passage-link").click()  # the sources list opens it too
    expect(panel.locator("mark.passage-mark")).to_contain_text("ninety minutes")
    expect(page.locator("#passage-panel-body")).to_be_focused()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()

    page.locator("#context-gauge .gauge-button").click()
    part = page.locator('.context-part[data-kind="documents"]')
    part.locator("summary").click()
    part.locator(".context-passage").first.get_by_role("button", name="Leave out").click()
    left_out = page.locator(".context-left-out-passages")
    expect(left_out).to_contain_text("Passages left out (1)")
    expect(left_out).to_contain_text("bread.md › Bread guide › Proofing")
    shot(page, f"context-left-out-{size}-{scheme}")
    left_out.get_by_role("button", name="Bring back").first.click()
    expect(left_out).to_have_count(0)
    assert page.errors == []


def test_the_library_deletes_a_document(open_page, site, bread_project):
    upload_attachment(site.url, "scratch.txt", b"A note to throw away.", "text/plain")
    page = open_page("desktop", "light", "/library")
    row = page.locator(".library-document", has_text="scratch.txt")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete scratch.txt").click()
    expect(row).to_have_count(0)
    page.reload()
    expect(page.locator(".library-document", has_text="scratch.txt")).to_have_count(0)
    expect(page.locator(".library-document", has_text="bread.md")).to_be_visible()
    assert page.errors == []
