"""Real headless Chromium at 1280×800 (light) and 390×844 (dark): in Settings, a
llama-server endpoint's Edit form says what the server reported of its model (tools on,
8,192 tokens of context, from /props and the model list); the user turns tools off and
sets the context for that model, turns the endpoint's retries off, saves, and finds all
of it kept on the next Edit (issue 23 items 4 and 7)."""

from __future__ import annotations

import pytest

from numi.testing import recordings as rec
from page_support import LOOKS, serious_violations

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_per_model_settings_and_retries_in_the_edit_form(
    site, api, scripted, open_page_on, shot, size, scheme
):
    scripted.models_body = rec.LLAMA_SERVER_MODELS
    scripted.props = rec.LLAMA_SERVER_PROPS
    name = f"llama {size}"
    status, endpoint = api.post(
        "/api/endpoints",
        {
            "name": name,
            "kind": "openai_chat",
            "base_url": scripted.openai_base_url,
            "default_model": "llama-tool",
        },
    )
    assert status == 201 and endpoint["models"] == ["llama-tool"]

    page = open_page_on(site, size, scheme, "/settings/endpoints")
    page.locator(f"#endpoint-{endpoint['id']}").get_by_role("link", name=f"Edit {name}").click()
    form = page.locator(f"form#endpoint-{endpoint['id']}")
    form.wait_for()
    retries = form.get_by_role("switch", name="Retry failed requests")
    assert retries.is_checked()
    form.get_by_text("Per-model settings").click()
    row = form.locator("fieldset.model-setting", has_text="llama-tool")
    tools = row.get_by_label("Tools")
    assert tools.locator("option:checked").inner_text() == "As reported (on, the server says)"
    context = row.get_by_label("Context (tokens)")
    assert context.get_attribute("placeholder") == "8,192 (the server says)"

    tools.select_option(label="Off")
    context.fill("4096")
    retries.uncheck()
    form.locator("details.model-settings").scroll_into_view_if_needed()
    shot(form, f"endpoint-model-settings-{size}-{scheme}")
    assert serious_violations(page, f"form#endpoint-{endpoint['id']}") == []
    form.get_by_role("button", name="Save").click()
    page.locator(f"div#endpoint-{endpoint['id']} .endpoint-status", has_text="Saved.").wait_for()

    saved = next(e for e in api.get("/api/endpoints")[1]["endpoints"] if e["id"] == endpoint["id"])
    assert saved["retries"] is False
    assert saved["model_capabilities"] == {"llama-tool": {"tools": False, "context_window": 4096}}

    # The next Edit opens the per-model settings (something is set) and shows them kept.
    page.locator(f"#endpoint-{endpoint['id']}").get_by_role("link", name=f"Edit {name}").click()
    form = page.locator(f"form#endpoint-{endpoint['id']}")
    row = form.locator("fieldset.model-setting", has_text="llama-tool")
    row.wait_for()
    assert row.get_by_label("Tools").locator("option:checked").inner_text() == "Off"
    assert row.get_by_label("Context (tokens)").input_value() == "4096"
    assert not form.get_by_role("switch", name="Retry failed requests").is_checked()
    assert page.errors == []
