"""Fixtures of the browser tests (the browser itself is `browser` in tests/conftest.py)."""

from __future__ import annotations

import pytest

from page_support import open_signed_in_page


@pytest.fixture
def open_page_on(browser):
    """`open_page_on(server, size, scheme, path="/", **options)`: `open_signed_in_page` in a
    fresh context, closed after the test; `page.errors` must stay empty."""
    pages = []

    def opener(server, size: str, scheme: str, path: str = "/", **options):
        pages.append(open_signed_in_page(browser, server, size, scheme, path, **options))
        return pages[-1]

    yield opener
    for page in pages:
        page.context.close()
