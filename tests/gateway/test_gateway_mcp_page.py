"""Settings → API keys in real Chromium, desktop and phone: a key for a desktop agent is
made with the uses it needs (MCP and reading chats, no models), listed with them, opens
/mcp and not /v1; a model alias is added with a chain and listed, then deleted."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from page_support import LOOKS, no_horizontal_overflow
from turn_support import Api


def _initialize(url: str, secret: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t"},
        },
    }
    request = urllib.request.Request(
        url + "/mcp",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.parametrize("size, scheme", LOOKS)
def test_a_key_for_a_desktop_agent_and_a_model_alias_are_made_in_settings(
    gateway, open_page_on, shot, size, scheme
):
    name = f"Claude Desktop on {size}"
    page = open_page_on(gateway.server, size, scheme, "/settings/api-keys")
    form = page.locator("#api-key-form")
    form.get_by_label("Name").fill(name)
    uses = form.locator(".api-key-uses")
    uses.get_by_label("Ask models").uncheck()
    uses.get_by_label("Read chats").check()
    uses.get_by_label("MCP server").check()
    shot(page, f"mcp-key-form-{size}")
    form.get_by_role("button", name="Make key").click()
    secret = page.locator("#api-key-secret")
    secret.wait_for()
    item = page.locator(".api-key-item", has_text=name)
    assert "May use: history, mcp." in item.inner_text()
    assert _initialize(gateway.server.url, secret.input_value()) == 200
    status, body = Api(gateway.server.url, token=secret.input_value()).get("/v1/models")
    assert status == 403 and body["error"]["code"] == "api_key_scope"

    alias_name = f"fast-{size}"
    aliases = page.locator("#model-alias-form")
    aliases.get_by_label("Alias").fill(alias_name)
    aliases.get_by_label("Models, one a line").fill("alpha/scripted-model\nbeta/scripted-model")
    aliases.get_by_role("button", name="Add alias").click()
    listed = page.locator(".model-alias-item", has_text=alias_name)
    listed.wait_for()
    assert "alpha/scripted-model, then beta/scripted-model" in listed.inner_text()
    assert no_horizontal_overflow(page)
    listed.scroll_into_view_if_needed()
    shot(page, f"mcp-alias-listed-{size}")
    # A refusal is shown beside the form and changes nothing.
    aliases = page.locator("#model-alias-form")
    aliases.get_by_label("Alias").fill("a/b")
    aliases.get_by_label("Models, one a line").fill("alpha/scripted-model")
    aliases.get_by_role("button", name="Add alias").click()
    page.locator(".model-aliases [data-code=invalid_alias_name]").wait_for()
    page.locator(".model-aliases").get_by_role(
        "button", name=f"Delete the alias {alias_name}"
    ).click()
    listed.wait_for(state="detached")
    assert alias_name not in [a["name"] for a in gateway.api.get("/api/aliases")[1]["aliases"]]
