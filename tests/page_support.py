"""Helpers for browser tests: the sizes every view is checked at, and a signed-in page in a
fresh browser context that collects console errors (CSP violations among them)."""

from __future__ import annotations

from typing import Callable

import pytest

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
# Every item at both sizes; the colour scheme alternates so both are covered without
# running every combination of everything.
LOOKS = [
    pytest.param("desktop", "light", id="desktop-light"),
    pytest.param("phone", "dark", id="phone-dark"),
]


def open_signed_in_page(
    browser,
    server,
    size: str,
    scheme: str,
    path: str = "/",
    *,
    timeout: int = 10_000,
    prepare: Callable | None = None,
    touch: bool = False,
):
    """A page of `server` at `path` in a new context (`size` of SIZES, colour `scheme`; a
    touch screen with `touch`), signed in through a one-time link; `prepare(context)` runs
    before the page opens.
    Console errors and page errors are collected on `page.errors`; the caller closes
    `page.context`."""
    context = browser.new_context(
        viewport=SIZES[size],
        color_scheme=scheme,
        base_url=server.url,
        has_touch=touch,
        is_mobile=touch,
    )
    if prepare:
        prepare(context)
    page = context.new_page()
    page.set_default_timeout(timeout)
    page.errors = []
    page.on(
        "console",
        lambda m: (
            page.errors.append(m.text) if m.type == "error" and "WebSocket" not in m.text else None
        ),
    )
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    server.sign_in(page, path)
    return page


def pick_model(page, query: str, within: str = "") -> None:
    """Pick a model as a person does: open the model picker (the first inside the selector
    `within`, else the page's first), type `query` (words of the endpoint's name and of the
    model's: the search matches both), press Enter on the first match."""
    page.locator(f"{within} .picker-button".strip()).first.click()
    search = page.get_by_role("combobox", name="Search models")
    search.wait_for()
    page.keyboard.type(query)
    page.keyboard.press("Enter")
    search.wait_for(state="hidden")


def open_chat(page, chat_id: str) -> None:
    """Open a chat (on the page's base URL) and wait for its live connection."""
    page.goto(f"/c/{chat_id}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")


def send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def serious_violations(page, region: str | None = None) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now (inside the CSS
    selector `region` when given)."""
    from axe_playwright_python.sync_playwright import Axe

    options = {"context": {"include": [[region]]}} if region else {}
    results = Axe().run(page, **options)
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:5]}"
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]
