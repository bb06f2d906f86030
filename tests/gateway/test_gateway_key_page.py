"""Settings → API keys in real Chromium, at desktop and phone size: a key is made with
the form, shown once in full (and fits the screen), listed by name afterwards without
its secret, and revoked with one click; the key works on /v1 until then."""

from __future__ import annotations

import pytest

from page_support import SIZES, in_viewport, no_horizontal_overflow
from turn_support import Api


@pytest.mark.parametrize("size, scheme", [("desktop", "light"), ("phone", "dark")])
def test_a_key_is_made_shown_once_and_revoked_in_settings(
    gateway, open_page_on, shot, size, scheme
):
    name = f"Chatbox on {size}"
    page = open_page_on(gateway.server, size, scheme, "/settings/api-keys")
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Make key").click()
    secret_box = page.locator("#api-key-secret")
    secret_box.wait_for()
    secret = secret_box.input_value()
    assert secret.startswith("numi-sk-")
    # In view and focused, however long the list above the form: ready to copy.
    page.wait_for_function(
        "document.activeElement && document.activeElement.id === 'api-key-secret'"
    )
    assert in_viewport(page, "#api-key-secret") and no_horizontal_overflow(page)
    shot(page, f"api-key-made-{size}")
    models = Api(gateway.server.url, token=secret).get("/v1/models")
    assert models[0] == 200 and models[1]["data"]
    page.reload()
    item = page.locator(".api-key-item", has_text=name)
    item.wait_for()
    assert secret not in page.content()
    shot(page, f"api-key-listed-{size}")
    item.get_by_role("button", name=f"Revoke {name}").click()
    page.locator(".api-key-item.revoked", has_text=name).wait_for()
    status, body = Api(gateway.server.url, token=secret).get("/v1/models")
    assert status == 401 and body["error"]["code"] == "api_key_invalid"
    assert page.viewport_size == SIZES[size]
