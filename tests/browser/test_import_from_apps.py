"""Real Chromium, desktop and phone: a person moving from Claude.ai picks the data export's
zip in Settings → Import; the chat opens with its edit as versions (‹ 2/2 ›), its thinking
folded, its artifact with a Preview, and its hostile title shown as text. Picking the same
zip again adds nothing and says so. Screenshots are saved under tmp_path."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

LOOKS = [("desktop", "light"), ("phone", "dark")]
IDS = [f"{size}-{scheme}" for size, scheme in LOOKS]
FIXTURE = Path(__file__).parents[1] / "chat" / "fixtures" / "imports" / "claude.json"


def claude_zip(tmp_path: Path, suffix: str) -> Path:
    """The Claude.ai fixture as its export zip, with ids of this test's own (the server is
    shared by the module, and a second import of the same ids adds nothing)."""
    conversations = json.loads(FIXTURE.read_text())
    for conversation in conversations:
        conversation["uuid"] += suffix
    path = tmp_path / f"data-{suffix}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("users.json", "[]")
        archive.writestr("conversations.json", json.dumps(conversations))
    return path


def pick_and_import(page, path: Path) -> None:
    page.set_input_files("form.import-form input[type=file]", str(path))
    page.click("form.import-form button[value=import]")


@pytest.mark.parametrize("size, scheme", LOOKS, ids=IDS)
def test_a_claude_export_zip_imports_with_versions_and_once_only(
    open_page, shot, tmp_path, size, scheme
):
    export = claude_zip(tmp_path, size)
    page = open_page(size, scheme, "/settings/import")
    pick_and_import(page, export)
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]+$"), timeout=60_000)
    assert "Sourdough <script>alert(1)</script> starter" in page.title()
    assert page.locator("script", has_text="alert(1)").count() == 0
    answer = page.locator(".msg-assistant", has_text="here is a chart")
    assert answer.locator(".version-count").inner_text() == "2/2"
    assert answer.locator("details", has_text="Reasoning").count() == 1
    assert answer.get_by_role("button", name=re.compile("Preview")).count() == 1
    assert page.locator(".msg-user", has_text="[attachment: feeding-log.txt]").count() == 1
    assert page.locator(".msg-assistant", has_text="Happy baking!").is_visible()
    assert page.get_by_text("Tool output").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, f"imported-claude-{size}-{scheme}", full_page=True)

    answer.get_by_role("button", name="Previous version").click()
    page.locator(".msg-assistant", has_text="Twice a day at room temperature.").wait_for()

    page.goto(page.url.split("/c/")[0] + "/settings/import")
    pick_and_import(page, export)
    page.get_by_text("imported before: nothing was added").wait_for(timeout=60_000)
    shot(page, f"imported-again-{size}-{scheme}")
    assert page.errors == []
