"""Helpers for browser tests: the sizes every view is checked at, and a signed-in page in a
fresh browser context that collects console errors (CSP violations among them)."""

from __future__ import annotations

import uuid

from typing import Callable

import pytest

from server_wait import WAIT_SECONDS

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
# Every item at both sizes; the colour scheme alternates so both are covered without
# running every combination of everything. A flow's assertions do not depend on the scheme,
# and each run costs a page in Chromium and the flow's turns (issue 36): two runs cover both
# sizes and both schemes. The axe checks of contrast run at all four.
LOOKS = [
    pytest.param("desktop", "light", id="desktop-light"),
    pytest.param("phone", "dark", id="phone-dark"),
]


def on_one_backend_each(names: str, *cases: tuple) -> pytest.MarkDecorator:
    """parametrize("module_database_url," + names) over `cases`, each `(backend, *values)`:
    for a module whose server runs on `module_database_url`, each case on one backend and
    each backend in one case. What the pages store goes through the API, whose tests run on
    both backends; the page's part does not differ by database, and four runs of a flow
    (two sizes on two backends) cost twice the browser's time of two (issue 36)."""
    return pytest.mark.parametrize(
        f"module_database_url,{names}",
        [
            pytest.param(*case, marks=pytest.mark.postgres) if case[0] == "postgres" else case
            for case in cases
        ],
        indirect=["module_database_url"],
        scope="module",
    )


# LOOKS for a module on `module_database_url`: the desktop on SQLite, the phone on PostgreSQL.
LOOKS_ON_BACKENDS = on_one_backend_each(
    "size,scheme", ("sqlite", "desktop", "light"), ("postgres", "phone", "dark")
)
SIZES_ON_BACKENDS = on_one_backend_each("size", ("sqlite", "desktop"), ("postgres", "phone"))


def open_signed_in_page(
    browser,
    server,
    size: str,
    scheme: str,
    path: str = "/",
    *,
    timeout: float = WAIT_SECONDS * 1000,
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


def serious_violations(page, *regions: str, frames: bool = True) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now: inside the CSS
    selectors `regions` when given (the parts a feature owns), and without the page's
    frames when `frames` is false (an artifact's document is the model's, not ours).

    axe-core (572 KB) is put into a document once, not at every check of it, and asked for
    violations only: its passes and incomplete checks, with every node they matched, were
    collected and thrown away (axe's `resultTypes`; the axe checks were a tenth of the browser
    tests' CPU, issue 36)."""
    from axe_playwright_python.base import AXE_SCRIPT

    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_SCRIPT)
    context = {"include": [[region] for region in regions]} if regions else None
    options = {"resultTypes": ["violations"], **({} if frames else {"iframes": False})}
    violations = page.evaluate(
        "async ([context, options]) => (await axe.run(context || document, options)).violations",
        [context, options],
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
        for v in violations
        if v.get("impact") in ("serious", "critical")
    ]


def reveal_sidebar(page, size: str) -> None:
    """Open the phone's drawer (unless it is open) so the sidebar can be used; nothing at
    desktop size, where the sidebar is always shown."""
    if size == "phone" and not page.evaluate(
        "() => document.querySelector('.layout').classList.contains('drawer-open')"
    ):
        page.click("#menu-button")
        page.wait_for_function(
            "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
        )


def unique_model() -> str:
    """A model name no other test uses (each test's chat gets its own)."""
    return f"page-{uuid.uuid4().hex[:8]}"


def no_horizontal_overflow(page) -> bool:
    """Whether the page fits its width (no sideways scrolling)."""
    return page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")


# A box's text is on one line when the box around its text is under two font sizes tall
# (one line is 1.2-1.6 of it, two at least 2.4).
_WRAPPED = """els => els.filter(e => {
  const range = document.createRange(); range.selectNodeContents(e);
  return range.getBoundingClientRect().height >= 2 * parseFloat(getComputedStyle(e).fontSize);
}).map(e => e.textContent.trim())"""


def wrapped_texts(locator) -> list[str]:
    """The texts among `locator`'s elements that wrap onto a second line."""
    return locator.evaluate_all(_WRAPPED)


def in_viewport(page, selector: str) -> bool:
    """Whether the element is wholly on screen."""
    return page.evaluate(
        """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.width > 0 && r.left >= 0 && r.top >= 0
          && r.right <= innerWidth + 0.5 && r.bottom <= innerHeight + 0.5; }""",
        selector,
    )


def focused_inside(page, selector: str) -> bool:
    """Whether the keyboard focus is inside the element."""
    return page.evaluate(
        "(sel) => !!document.activeElement && !!document.activeElement.closest(sel)", selector
    )


WORKER_STATE = """async () => {
  const r = await navigator.serviceWorker.getRegistration();
  if (!r) return "no registration";
  const s = (w) => w ? w.state : "none";
  return `installing ${s(r.installing)}, waiting ${s(r.waiting)}, active ${s(r.active)}`;
}"""


def wait_until_controlled(page) -> None:
    """Wait (the hang-only deadline) until the service worker controls `page`: installing it
    fetches the whole app shell first. A timeout says how far the worker got, so a failure
    tells an install that failed (no active worker) from one still running."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            "() => navigator.serviceWorker.controller !== null", timeout=WAIT_SECONDS * 1000
        )
    except PlaywrightTimeout:
        raise AssertionError(f"no worker controls the page: {page.evaluate(WORKER_STATE)}")
