"""Fixtures of the browser tests (the browser itself is `browser` in tests/conftest.py).

Every module gets one live server, `site` (module scope; a module that needs settings of its
own returns them from a module-scoped `site_env` fixture), `api` on it, and `open_page`, a
signed-in page on it at a size and colour scheme.
"""

from __future__ import annotations

import pytest

from turn_support import Api, turn_server_env


@pytest.fixture(scope="module")
def site_env() -> dict[str, str]:
    """The extra environment of the module's server (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def site(live_server_factory, site_env):
    """The module's live `numi serve`, with the scripted provider's settings and `site_env`."""
    started = live_server_factory(**turn_server_env(**site_env))
    yield started
    started.stop()


@pytest.fixture
def api(site):
    """The JSON API of the module's server."""
    return Api(site.url, token=site.token)


@pytest.fixture
def open_page(open_page_on, site):
    """`open_page(size, scheme, path="/")`: `open_page_on` the module's server."""
    return lambda size, scheme, path="/": open_page_on(site, size, scheme, path)
